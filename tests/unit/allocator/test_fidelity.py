"""Fidelity: replayed under its own settings, every recording's segment events come back.

Checked on every snapshot the tests can see whose trace holds segment events: none is
skipped, and at least 90% must match exactly (today all of them do; a file that does not is
printed with its first difference). The what-if truth set (sample_snapshots/whatif: a
recording and an OOM recording per workload, some of 80,000 events) is a slow case of its
own; the samples, scenarios, held-out recordings and shared files run by default.
"""

from pathlib import Path

import numpy as np
import pytest

from memtui.allocator.settings import settings_of_snapshot
from memtui.analysis.whatif import check_fidelity
from memtui.analysis.whatif_requests import build_requests
from memtui.model import actions as act
from tests.conftest import heldout_files, sample_files, scenario_files, shared_files, whatif_files
from tests.fixtures.opened import cached


def check_all(files: list[Path]) -> tuple[int, int, list[str]]:
    checked, exact, misses = 0, 0, []
    for path in files:
        snapshot = cached(str(path))
        _, settings = settings_of_snapshot(snapshot.allocator_settings)
        for dev in snapshot.devices:
            if not np.isin(dev.trace.action, act.SEGMENT_ACTIONS).any():
                continue
            fidelity = check_fidelity(dev, build_requests(dev), settings)
            assert fidelity.checked
            checked += 1
            if fidelity.exact:
                exact += 1
                assert fidelity.matched == fidelity.segment_events and fidelity.first_difference is None
            else:
                misses.append(f"{path.name} device {dev.device}: {fidelity.first_difference}")
    return checked, exact, misses


def test_fidelity_on_every_sample_scenario_and_held_out_recording():
    checked, exact, misses = check_all(sample_files() + scenario_files() + heldout_files())
    assert checked >= 80, checked
    assert exact >= 0.9 * checked, "\n".join(misses)


def test_fidelity_on_every_shared_recording():
    files = [p for p in shared_files() if p.name != "big_trace.pickle.xz"]  # no segment events: nothing to check
    checked, exact, misses = check_all(files)
    assert checked > 0
    assert exact >= 0.9 * checked, "\n".join(misses)


@pytest.mark.slow
def test_fidelity_on_the_whatif_truth_set():
    checked, exact, misses = check_all(whatif_files())
    assert checked == len(whatif_files())  # each recording has segment events
    assert exact >= 0.9 * checked, "\n".join(misses)


def test_a_ring_cut_between_a_free_and_its_completion_frees_the_block_at_the_completion():
    # The ring buffer kept the free_completed but not the free_requested of the block in a
    # small segment; the OOM's retry then released that segment. The replay starts from the
    # reconstructed state (the block allocated) and must return the block at its completion.
    from memtui.model import build_model

    mib, a, b = 1 << 20, 0x7F0000000000, 0x7F1000000000

    def entry(action, addr, size, **extra):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1.0,
                "compile_context": "N/A", "user_metadata": "", "frames": [], **extra}

    trace = [entry("free_completed", a, 4096), entry("alloc", b, 30 * mib),
             entry("segment_free", a, 2 * mib), entry("oom", 0, 40 * mib, device_free=1 << 30)]
    big = {"address": b, "total_size": 30 * mib, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": [], "allocated_size": 30 * mib, "active_size": 30 * mib,
           "requested_size": 30 * mib, "device": 0,
           "blocks": [{"address": b, "size": 30 * mib, "requested_size": 30 * mib, "state": "active_allocated",
                       "frames": []}]}
    snapshot = build_model({"segments": [big], "device_traces": [trace], "allocator_settings": {}})
    dev = snapshot.devices[0]
    requests = build_requests(dev)
    assert requests.initial, "the trace starts mid-run"
    fidelity = check_fidelity(dev, requests, settings_of_snapshot({})[1])
    assert fidelity.exact, fidelity.first_difference
