"""The reference-cycle sawtooth: flagged on the refcycle files, quiet on everything else."""

from __future__ import annotations

import pytest

from memtui.analysis.cycles import find_cycles
from tests.conftest import shared_files
from tests.fixtures.opened import shared

QUIET = [p.name.split(".pickle")[0] for p in shared_files("*.pickle") if not p.name.startswith("refcycle")]


@pytest.mark.shared
def test_refcycle_simple_is_unbounded_and_caused_the_oom():
    snap = shared("refcycle_simple")
    report = find_cycles(snap, snap.devices[0])
    j = report.to_json()
    assert j["cycles_suspected"] is True and j["pattern"] == "unbounded" and j["bounded"] is False
    assert {s["frames"][0]["line"] for s in j["sites"]} == {183, 184}
    (burst,) = j["bursts"]
    assert burst["lives"] == 126 and burst["rounds"] == 63
    assert burst["allocated_before"] == 8 << 30
    (oom,) = j["ooms_while_accumulating"]
    assert oom["index"] == 256 and oom["lives"] == 126


@pytest.mark.shared
def test_refcycle_gc_interval_is_a_bounded_sawtooth():
    snap = shared("refcycle_gc_interval")
    j = find_cycles(snap, snap.devices[0]).to_json()
    assert j["cycles_suspected"] is True and j["pattern"] == "bounded"
    assert len(j["bursts"]) == 20
    # gc.collect() every 20 iterations, two tensors per iteration.
    assert all(b["rounds"] >= 19 and b["lives"] >= 38 for b in j["bursts"])
    assert {b["collected_at"] for b in j["bursts"][:-1]} == {j["bursts"][0]["collected_at"]}
    assert j["ooms_while_accumulating"] == []


@pytest.mark.shared
@pytest.mark.parametrize("name", QUIET or [pytest.param(None, marks=pytest.mark.skip(reason="no shared files"))])
def test_quiet_on_plain_runs(name):
    snap = shared(name)
    for dev in snap.devices:
        j = find_cycles(snap, dev).to_json()
        assert j["cycles_suspected"] is not True and j == {**j, "sites": [], "bursts": []}
