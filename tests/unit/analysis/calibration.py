"""Calibration: how often each analysis is right at each confidence level.

A confidence level is a promise: ``high`` means right at least 98% of the time, ``medium``
at least 85%, on files the rules were not made on. This module scores ``leaks``,
``cycles`` and ``oom`` on every file with a known truth and counts, per analysis and
level, the verdicts given and how many were right. ``cannot tell`` (low) promises
nothing and is counted apart.

The files come in two groups:

* **build**: the scenario matrix (tests/unit/analysis/matrix.py) and the ``build`` half of
  ``sample_snapshots/heldout`` (``"split": "build"`` in its truth file): the files the
  rules were made and checked on;
* **held out**: the ``heldout`` half, recorded from programs written without seeing the
  rules, scored once with the rules as they stood; two rules were corrected after that
  score (docs/analyses.md says which), so these now count among the files the rules were
  made on;
* **held out, second set**: ``sample_snapshots/heldout2`` (``"split": "heldout2"``),
  recorded after those corrections from programs written apart from the rules, scored
  once; four rules were corrected after that score, so these too now count among the
  files the rules were made on;
* **held out, third set**: ``sample_snapshots/heldout3`` (``"split": "heldout3"``),
  recorded after those corrections, scored once.

The held-out truth is what the live program measured (sample_snapshots/heldout/README.md):
``leak``; ``reference_cycles`` (the collector freed CUDA memory while history was
recorded); ``oom.cause``, ``capacity`` (the request was more than the free memory and the
headroom together) or ``fragmentation``. The OOM verdicts ``process_cap`` and
``external`` name which limit was reached; both say the memory was not there, so they
score as ``capacity``.

``python -m tests.unit.analysis.calibration`` prints the tables docs/analyses.md carries.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import HELDOUT_SETS, SAMPLES
from tests.fixtures.opened import verdicts
from tests.unit.analysis.matrix import Score, all_scores

HELDOUT_FOLDERS = tuple(SAMPLES / name for name in HELDOUT_SETS)
SPLITS = ("build", *HELDOUT_SETS)  # each held-out set's files carry its folder's name as their split
PROMISE = {"high": 0.98, "medium": 0.85}
ANALYSES = ("leaks", "cycles", "oom")
OOM_AS = {"capacity": "capacity", "process_cap": "capacity", "external": "capacity", "fragmentation": "fragmentation"}


@dataclass
class Scored:
    split: str  # "build" or "heldout"
    score: Score

    @property
    def right(self) -> bool:
        s = self.score
        if s.analysis == "oom":
            return OOM_AS.get(s.verdict, s.verdict) == OOM_AS.get(s.truth, s.truth)
        return s.verdict == s.truth


def heldout_files() -> list[tuple[str, Path, dict]]:
    """(name, snapshot path, truth) of every held-out recording present."""
    out = []
    for truth_path in sorted(p for folder in HELDOUT_FOLDERS if folder.is_dir() for p in folder.glob("*.truth.json")):
        truth = json.loads(truth_path.read_text())
        name = truth_path.name.removesuffix(".truth.json")
        found = [p for p in truth_path.parent.glob(f"{name}.pickle*") if not p.name.endswith(".json")]
        if found and truth.get("split") in SPLITS:
            out.append((name, found[0], truth))
    return out


def score_heldout(name: str, path: Path, truth: dict) -> list[Score]:
    _, _, leaks, cycles, ooms = verdicts(str(path))
    out = []
    if truth.get("reference_cycles") is not None:
        out.append(Score(name, "cycles", cycles.stacks, "cycles" if truth["reference_cycles"] else "no cycles",
                         cycles.verdict, cycles.confidence))
    if truth.get("leak") is not None:
        out.append(Score(name, "leaks", cycles.stacks, "leak" if truth["leak"] else "no leak", leaks.verdict,
                         leaks.confidence))
    cause = (truth.get("oom") or {}).get("cause")
    if cause:
        for d in ooms[:1]:  # the truth describes the first OOM
            out.append(Score(name, "oom", cycles.stacks, cause, d.verdict, d.confidence))
    return out


def all_scored() -> list[Scored]:
    out = [Scored("build", s) for s in all_scores()]
    for name, path, truth in heldout_files():
        out += [Scored(truth["split"], s) for s in score_heldout(name, path, truth)]
    return out


def calibration_table(scored: list[Scored], split: str) -> str:
    """Markdown: per analysis and level, verdicts given, right, the share right and the promise."""
    rows = [s for s in scored if s.split == split]
    lines = ["| analysis | confidence | verdicts | right | share right | 95% lower bound | promise |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for analysis in ANALYSES:
        mine = [s for s in rows if s.score.analysis == analysis]
        for level in ("high", "medium"):
            at = [s for s in mine if s.score.confidence == level and s.score.verdict != "cannot tell"]
            right = sum(s.right for s in at)
            share = f"{100 * right / len(at):.0f}%" if at else "-"
            bound = f"{100 * wilson_lower(right, len(at)):.0f}%" if at else "-"
            kept = "-" if not at else "met" if right >= PROMISE[level] * len(at) else "**broken**"
            lines.append(f"| {analysis} | {level} | {len(at)} | {right} | {share} | {bound} | {kept} (>= "
                         f"{PROMISE[level]:.0%}) |")
        told = sum(1 for s in mine if s.score.verdict == "cannot tell" or s.score.confidence == "low")
        lines.append(f"| {analysis} | cannot tell | {told} | | | | none |")
    return "\n".join(lines) + "\n"


def wilson_lower(right: int, n: int, z: float = 1.96) -> float:
    """The Wilson score interval's lower end: with few verdicts, 100% right is weak evidence
    of a 98% promise, and this says how weak."""
    if n == 0:
        return 0.0
    p = right / n
    centre = p + z * z / (2 * n)
    spread = z * ((p * (1 - p) + z * z / (4 * n)) / n) ** 0.5
    return (centre - spread) / (1 + z * z / n)


def wrong_confident(scored: list[Scored]) -> list[Scored]:
    return [s for s in scored if not s.right and s.score.confidence in PROMISE and s.score.verdict != "cannot tell"]


if __name__ == "__main__":
    found = all_scored()
    for split in SPLITS:
        sys.stdout.write(f"\n{split}:\n\n" + calibration_table(found, split))
    sys.stdout.write("\nconfident and wrong:\n")
    for s in wrong_confident(found):
        sys.stdout.write(json.dumps({"split": s.split, **s.score.__dict__}) + "\n")
