"""One truth for both decoders: the compiled scanner against the reference, on mutated real files.

Every family of real files the tests have (tests/fixtures/differential.py) is mutated the
same way on every run: ``CASES`` cases per family by default. A long run sets
``MEMTUI_DIFF_CASES`` (10,000 per family, say) and optionally ``MEMTUI_DIFF_SHARD=k/n``
to run every n-th case from the k-th on one of n processes, and ``MEMTUI_DIFF_SAVE=DIR``
to keep each disagreeing file there; pytest prints the counts at the end. Every
disagreement found becomes a file in tests/unit/differential_cases/, checked below on
every run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtui.load import fast
from memtui.open import open_fast, open_snapshot
from tests.fixtures.differential import bases, disagreement, families, mutated_case, outcome_of
from tests.fixtures.snapshot_strategies import count_case

CASES = int(os.environ.get("MEMTUI_DIFF_CASES", "25"))
_SHARD = os.environ.get("MEMTUI_DIFF_SHARD", "0/1")
SHARD, SHARDS = (int(x) for x in _SHARD.split("/"))
SAVE = os.environ.get("MEMTUI_DIFF_SAVE")
REGRESSIONS = Path(__file__).parent / "differential_cases"


def reference(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(fast, "enabled", False)
        return outcome_of(lambda p: open_snapshot(p, cache=None), path)


def compare(path, monkeypatch, family: str | None = None) -> str | None:
    scanned = outcome_of(open_fast, path)
    if scanned is None:
        return None
    if family is not None:  # how many cases the scanner read itself, not handed over
        count_case(f"differential {family} read by the scanner")
    return disagreement(scanned, reference(path, monkeypatch))


@pytest.mark.skipif(not fast.available(), reason="the compiled scanner is not built")
@pytest.mark.parametrize("family", sorted(families()))
def test_mutated_real_files_decode_alike(tmp_path, monkeypatch, family):
    if not bases(family):
        pytest.skip(f"no file of {family} is small enough to fuzz")
    found = []
    path = tmp_path / "case.pickle"
    for index in range(SHARD, CASES, SHARDS):
        data = mutated_case(family, index)
        path.write_bytes(data)
        why = compare(path, monkeypatch, family)
        count_case(f"differential {family}")
        if why is not None:
            found.append(f"{family} case {index}: {why}")
            if SAVE:
                Path(SAVE, f"{family}-{index}.pickle").write_bytes(data)
    assert not found, "\n".join(found)


@pytest.mark.skipif(not fast.available(), reason="the compiled scanner is not built")
@pytest.mark.parametrize("name", sorted(p.name for p in REGRESSIONS.glob("*.pickle")) or ["none"])
def test_disagreements_found_before_stay_fixed(monkeypatch, name):
    if name == "none":
        pytest.skip("no disagreement has been found")
    assert compare(REGRESSIONS / name, monkeypatch) is None
