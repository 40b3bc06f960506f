"""Confidence is a promise (tests/unit/analysis/calibration.py): no verdict given at high or
medium confidence is wrong on any file whose truth is known, build or held out, and
docs/analyses.md carries the calibration tables as computed here."""

from __future__ import annotations

import functools

import pytest

from tests.conftest import HELDOUT_SETS, ROOT, SHARED
from tests.unit.analysis.calibration import all_scored, calibration_table, heldout_files, wrong_confident

DOCS = ROOT / "docs" / "analyses.md"


@functools.cache
def scored():
    return all_scored()


def test_no_high_confidence_verdict_is_wrong_anywhere():
    wrong = [s for s in wrong_confident(scored()) if s.score.confidence == "high"]
    assert not wrong, [(s.split, s.score.file, s.score.analysis, s.score.verdict, s.score.truth) for s in wrong]


def test_each_level_keeps_its_promise_on_the_build_files():
    table = calibration_table(scored(), "build")
    assert "**broken**" not in table, table


def test_docs_carry_the_calibration_tables():
    if not SHARED.is_dir():
        pytest.skip("the build tables count the shared snapshots too")
    text = DOCS.read_text()
    assert calibration_table(scored(), "build") in text, "docs/analyses.md: paste `python -m " \
                                                        "tests.unit.analysis.calibration`"
    for split in HELDOUT_SETS:
        if any(truth["split"] == split for _, _, truth in heldout_files()):
            assert calibration_table(scored(), split) in text, split


def test_no_confident_verdict_is_wrong_on_the_files_the_rules_were_made_on():
    # The rules were made on these: a list comprehension read as iterations of a leak, a
    # cap-dependent fragmentation guess, small cycles called "no cycles" were each fixed on
    # the build half; library frees read as the collector and a guess under an unrecorded
    # cap, on the first held-out half after it was scored; a loop's working set given back
    # read as a leak (high), a buffer grown by torch.cat read as no leak, small collections
    # beside explained bursts and frees that carry their allocation's stack (context='alloc')
    # read as no cycles, on the second held-out set after it was scored; memory held by
    # cycles read as a leak where the cycle analysis could not tell, on the third. The
    # fourth set was scored after all of them and no rule changed since: a medium verdict
    # may be wrong there within its promise (its table says how often).
    made_on = ("build", "heldout", "heldout2", "heldout3")
    wrong = [s for s in wrong_confident(scored()) if s.split in made_on]
    assert not wrong, [(s.score.file, s.score.analysis, s.score.verdict, s.score.truth) for s in wrong]
