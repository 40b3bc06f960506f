"""Every analysis over the recordings of known cause (tests/unit/analysis/matrix.py): no confident
verdict against the truth, the confusion tables in docs/analyses.md as computed here, and
every verdict that is not right explained there."""

from __future__ import annotations

import functools

import pytest

from memtui.analysis.cycles import find_cycles
from memtui.analysis.leaks import find_leaks
from memtui.analysis.oom import diagnose_ooms
from tests.conftest import ROOT, SHARED
from tests.fixtures.opened import cached
from tests.unit.analysis.matrix import all_scores, confusion_tables, matrix_files, misses

DOCS = ROOT / "docs" / "analyses.md"


@functools.cache
def scores():
    return all_scores()


def test_no_confident_verdict_against_the_truth():
    wrong = [s for s in scores() if s.cell == "wrong"]
    assert not wrong, "\n".join(f"{s.file}: {s.analysis} says {s.verdict} ({s.confidence}), truth {s.truth}"
                                for s in wrong)


def test_the_matrix_covers_both_kinds_of_stacks_and_every_analysis():
    found = scores()
    for analysis in ("cycles", "leaks", "oom"):
        assert {s.stacks for s in found if s.analysis == analysis} >= {"python", "all"}
    # The scenarios that the old heuristics got wrong are right now (kv_cache_grows_then_freed_py
    # was, until "no leak" over time windows became cannot tell: its trace has no repeated step).
    right = {(s.file, s.analysis) for s in found if s.cell == "right"}
    for name in ("cycle_awaitable_all", "cycle_gc_interval_all", "exception_cleanup_all", "eval_loop_end_all",
                 "leak_cache_dict_py", "leak_hooks_all"):
        assert any(f == name for f, _ in right), name
    assert ("oom_growing_batch_py", "oom") in right


def test_docs_carry_the_confusion_tables_and_explain_every_miss():
    if not SHARED.is_dir():
        pytest.skip("the tables count the shared snapshots too")
    text = DOCS.read_text()
    assert confusion_tables(scores()) in text, "docs/analyses.md: paste `python -m tests.unit.analysis.matrix`"
    explained = text.split("### Every verdict that is not right", 1)[1]
    for s in misses(scores()):
        assert f"`{s.file}`" in explained, f"{s.file} ({s.analysis}) is not explained in docs/analyses.md"


@pytest.mark.parametrize("name", [name for name, _, _ in matrix_files()])
def test_every_verdict_carries_evidence_and_names_its_device(name):
    path = next(p for n, p, _ in matrix_files() if n == name)
    snap = cached(str(path))
    dev = snap.devices[snap.default_device()]
    cycles = find_cycles(snap, dev)
    leaks = find_leaks(snap, dev)
    for report in (cycles, leaks):
        j = report.to_json()
        assert j["device"] == dev.device and j["evidence"] and j["confidence"] in ("high", "medium", "low")
        assert j["alternatives"] or j["verdict"] == "cannot tell"
    assert cycles.suspected == (None if cycles.verdict == "cannot tell" else
                                cycles.verdict == "cycles" and cycles.confidence != "low")
    for d in diagnose_ooms(snap, dev.device):
        assert d.device == dev.device and d.evidence and d.alternatives
        # The collector is named only when `cycles` says so for the same device.
        if not cycles.suspected:
            assert d.held_by_cycles == 0 and not any("garbage collector" in e.text for e in d.evidence)


def test_the_callback_leak_is_named_with_its_frames_and_its_oom():
    snap = cached(str(ROOT / "sample_snapshots/scenarios/cycle_awaitable_all.pickle.xz"))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cycles" and report.confidence == "high" and report.suspected
    text = " ".join(e.text for e in report.evidence)
    assert "PyObject_GC_Del" in text and "the cycle collector" in text and "scenarios.py:74" in text
    assert report.ooms_while_accumulating and report.ooms_while_accumulating[0]["lives"] == 10
    (d,) = diagnose_ooms(snap, 0)
    assert d.held_by_cycles == 640 << 20 and any("garbage collector" in e.text for e in d.evidence)
    # The Python-only recording of the same run says the same, less sure of it.
    snap = cached(str(ROOT / "sample_snapshots/scenarios/cycle_awaitable_py.pickle.xz"))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cycles" and report.confidence == "medium"
    assert any("out of order" in e.text for e in report.evidence)


def test_an_exception_burst_is_not_the_collector():
    snap = cached(str(ROOT / "sample_snapshots/scenarios/exception_cleanup_all.pickle.xz"))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "no cycles" and report.confidence == "high" and not report.suspected
    assert {b.cause for b in report.other_bursts} == {"exception"}
    for d in diagnose_ooms(snap, 0):
        assert d.freed_after["cause"] == "exception" and d.held_by_cycles == 0
        assert not any("garbage collector" in e.text for e in d.evidence)
