"""OOM diagnosis: the verdicts the real files' OOM messages support, and the other verdicts on
hand-made snapshots."""

from __future__ import annotations

import re

import pytest

from memtui.analysis.oom import diagnose_ooms
from memtui.errors import UsageError
from memtui.open import open_snapshot
from tests.conftest import SHARED, truth_for
from tests.fixtures.opened import GIB, MIB, frame, segment, shared, write_snapshot


def message_figure(message: str, pattern: str) -> float:
    """A size in bytes from torch's OOM message ('Tried to allocate 4.00 GiB' -> 4 GiB)."""
    value, unit = re.search(pattern + r" ([\d.]+) (GiB|MiB|KiB|bytes)", message).groups()
    return float(value) * {"GiB": GIB, "MiB": MIB, "KiB": 1024, "bytes": 1}[unit]


def only_oom(name: str):
    found = diagnose_ooms(shared(name))
    assert len(found) == 1
    return found[0]


@pytest.mark.shared
@pytest.mark.parametrize("name", ["oom_real", "oom_training", "refcycle_simple"])
def test_oom_entries_match_truth(name):
    d = only_oom(name)
    truth = truth_for(SHARED / f"{name}.pickle")
    (expected,) = truth["traces"][0]["ooms"]
    assert (d.index, d.requested, d.device_free) == (expected["index"], expected["size"], expected["device_free"])
    message = truth["oom_message"]
    assert d.requested == pytest.approx(message_figure(message, "Tried to allocate"), rel=0.01)
    # "X is reserved by PyTorch but unallocated": the cached free memory at the OOM.
    unallocated = message_figure(message, "and")
    assert d.cached_free == pytest.approx(unallocated, rel=0.01, abs=1)


@pytest.mark.shared
def test_oom_real_is_capacity_on_a_full_device():
    d = only_oom("oom_real")
    # 3.29 GiB free of 139.80, 136 GiB reserved and all of it allocated: a full device.
    assert d.verdict == "capacity"
    assert not d.process_limit
    assert d.largest_free_block == 0 and d.cached_free == 0
    assert d.device_total_estimated and d.non_pytorch < GIB  # the CUDA context, not another process
    assert d.top_sites[0]["count"] == 34 and d.top_sites[0]["bytes"] == 136 * GIB


@pytest.mark.shared
def test_oom_training_is_the_process_cap():
    d = only_oom("oom_training")
    # 122 GiB free on the device, "6.00 GiB allowed": the cap refused it, and the 880 KiB
    # cached in a small-pool segment cannot serve a 1 GiB request. The batch doubled each
    # step: the request outgrew what the cap left (nothing piled up), so the cap is the
    # verdict, not "capacity" (the old verdict, which sent users after what is live).
    assert d.process_limit and d.verdict == "process_cap" and d.confidence == "medium"
    assert d.request_history["growing"]
    assert d.pool == "large" and d.usable_free == 0
    assert d.cap_at_least <= 6 * GIB < d.cap_below
    assert d.released_before > 0  # the free-and-retry segment frees before the OOM
    assert d.non_pytorch is None


@pytest.mark.shared
def test_refcycle_oom_is_capacity_under_a_cap_with_memory_waiting_for_gc():
    d = only_oom("refcycle_simple")
    assert d.process_limit and d.verdict == "capacity"
    assert d.cap_at_least <= 8 * GIB < d.cap_below
    assert d.held_by_cycles > 7 * GIB
    assert any("garbage collector" in e.text for e in d.evidence)
    assert d.freed_after["cause"] == "cycle"


def fragmented(tmp_path, device_free: int):
    """A 60 MiB segment with two 10 MiB holes; a 16 MiB request fails."""
    base = 0x7F0000000000
    blocks = [(0, 20 * MIB, "active_allocated"), (20 * MIB, 10 * MIB, "inactive"),
              (30 * MIB, 20 * MIB, "active_allocated"), (50 * MIB, 10 * MIB, "inactive")]
    trace = [{"action": "segment_alloc", "addr": base, "size": 60 * MIB, "frames": [frame(5)]}]
    for offset, size, _ in blocks:
        trace.append({"action": "alloc", "addr": base + offset, "size": size, "frames": [frame(10 + offset // MIB)]})
    for offset in (20 * MIB, 50 * MIB):
        for action in ("free_requested", "free_completed"):
            trace.append({"action": action, "addr": base + offset, "size": 10 * MIB, "frames": [frame(40)]})
    trace.append({"action": "oom", "addr": 0, "size": 16 * MIB, "device_free": device_free, "frames": [frame(50)]})
    path = write_snapshot(tmp_path / "frag.pickle", [segment(base, 60 * MIB, blocks)], trace)
    return open_snapshot(path)


def test_fragmentation_verdict_and_advice(tmp_path):
    (d,) = diagnose_ooms(fragmented(tmp_path, device_free=4 * MIB), device_total=8 * GIB)
    assert d.verdict == "fragmentation"
    assert d.usable_free == 20 * MIB and d.largest_free_block == 10 * MIB
    assert d.fits_with_expandable == 24 * MIB
    assert d.to_json()["verdict"] == "fragmentation"


def test_external_verdict_when_the_device_is_full_of_someone_else(tmp_path):
    base = 0x7F0000000000
    blocks = [(0, 100 * MIB, "active_allocated")]
    trace = [{"action": "segment_alloc", "addr": base, "size": 100 * MIB},
             {"action": "alloc", "addr": base, "size": 100 * MIB, "frames": [frame(7)]},
             {"action": "oom", "addr": 0, "size": 2 * GIB, "device_free": 100 * MIB, "frames": [frame(8)]}]
    snap = open_snapshot(write_snapshot(tmp_path / "ext.pickle", [segment(base, 100 * MIB, blocks)], trace))
    (d,) = diagnose_ooms(snap, device_total=16 * GIB)
    assert d.verdict == "external" and not d.process_limit
    assert d.non_pytorch == 16 * GIB - 200 * MIB
    # Told the device has only what is seen, the same OOM is a capacity problem.
    (d,) = diagnose_ooms(snap, device_total=200 * MIB)
    assert d.verdict == "capacity"
    # Told less than it saw (reserved plus free), the total is not this device's: refused in one line.
    with pytest.raises(UsageError, match="less than the OOM saw on the device: 100.00 MiB reserved and 100.00 MiB"):
        diagnose_ooms(snap, device_total=200 * MIB - 1)


def test_a_full_small_device_is_external_by_estimate(tmp_path):
    # 60 MiB reserved and nothing free: every common GPU is larger, so most of it is used elsewhere.
    snap = fragmented(tmp_path, device_free=0)
    snap.devices[0].trace.size[snap.devices[0].oom_indices()[0]] = 32 * MIB  # more than the holes hold
    (d,) = diagnose_ooms(snap)
    assert d.device_total_estimated and d.verdict == "external"


def test_small_requests_cannot_use_large_pool_holes(tmp_path):
    snap = fragmented(tmp_path, device_free=0)
    dev = snap.devices[0]
    dev.trace.size[dev.oom_indices()[0]] = 512 * 1024  # a small-pool request
    (d,) = diagnose_ooms(snap, device_total=60 * MIB)
    assert d.pool == "small" and d.usable_free == 0 and d.verdict == "capacity"
