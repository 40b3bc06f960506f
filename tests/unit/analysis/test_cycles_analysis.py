"""The reference-cycle sawtooth: flagged on the refcycle files, quiet on everything else."""

from __future__ import annotations

import re

import pytest

from memtui.analysis.cycles import _frees_in, find_cycles
from memtui.report.text import text_lines
from memtui.services.cycles import CyclesOptions, cycles
from tests.conftest import SAMPLES, shared_files
from tests.fixtures.opened import cached, shared

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


@pytest.mark.shared
@pytest.mark.parametrize("name", ["leak_loss_history", "oom_training", "expandable_segments"])
def test_the_text_counts_the_bursts_the_json_lists(name):
    """Each burst of these files is split into groups, one per call site (two per burst in
    leak_loss_history); every count the text gives is of bursts, the ones other_bursts lists."""
    snap = shared(name)
    result = cycles(snap, CyclesOptions(device=0))
    j = result.to_json()
    assert j["verdict"] == "no cycles" and not j["bursts"] and j["other_bursts"]
    n = len(j["other_bursts"])
    said = [j["evidence"][0]["text"], *(a["why"] for a in j["alternatives"] if "bytes" in a)]
    text = "\n".join(text_lines(result.report()))  # what `memtui cycles` prints
    for line in said:
        assert line in text
        assert re.findall(r"(?<![\d.])(\d[\d,]*) ([a-z]+)", line) == [(f"{n:,}", "bursts")], line
    assert f"explains frees in {n:,} bursts (other_bursts)" in text


def test_a_cause_counts_the_bursts_it_explains_frees_in_and_says_where_they_are_listed():
    assert _frees_in({0, 1, 2}, set()) == "frees in 3 bursts (other_bursts)"
    assert _frees_in({4}, {4, 5}) == "frees in 1 burst (bursts, where the collector freed too)"
    assert _frees_in({1, 2, 3}, {3}) == \
        "frees in 3 bursts (2 in other_bursts, 1 in bursts, where the collector freed too)"


@pytest.mark.parametrize("name", ["format/fx_compile", "recorded/oom_caught_reraised"])
def test_no_pile_of_one_call_site_is_said_only_of_bursts_without_one(name):
    """A burst lists in other_bursts when it freed MIN_SITE_LIVES or more allocations of one
    call site (fx_compile: one, which nothing recorded explains, too small to decide the
    verdict); the evidence says no burst did only when none is listed (oom_caught_reraised)."""
    snap = cached(str(SAMPLES / f"{name}.pickle.xz"))
    j = find_cycles(snap, snap.devices[0]).to_json()
    assert j["verdict"] == "no cycles" and not j["bursts"]
    said_none = "none freeing 4 or more allocations of one call site" in j["evidence"][0]["text"]
    assert said_none == (not j["other_bursts"])
    if j["other_bursts"]:
        n = len(j["other_bursts"])
        assert f"frees in {n:,} burst{'s' if n > 1 else ''}" in j["evidence"][0]["text"]
