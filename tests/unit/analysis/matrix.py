"""The scored matrix: every analysis over recordings of known cause, verdict against truth.

The files: ``sample_snapshots/scenarios`` (each scenario recorded with stacks "python" and
"all", with ``NAME.truth.json``), four recordings of ``sample_snapshots/recorded`` and five
of ``../shared/snapshots``. The last two sets have no ``cause`` in their truth files, so
their truth is written here, from what the recording did (their READMEs).

Each verdict falls in one of three cells: ``right``, ``cannot tell`` (low confidence: the
verdict says it cannot tell, which is accepted) or ``wrong`` (a confident verdict against
the truth: never accepted). ``python -m tests.unit.analysis.matrix`` prints the confusion
tables that docs/analyses.md carries.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import SAMPLES, SHARED, scenario_files, truth_for
from tests.fixtures.opened import verdicts

# Causes whose scenarios hold no leak: scored "no leak" although their truth has no `leak`.
NOT_LEAKS = {"training", "del_model", "optimizer_state_replaced", "empty_cache", "eval_loop_end", "zero_grad",
             "exception_cleanup"}

# Truth for files recorded without a `cause`: what the recording did, as its README says.
RECORDED_TRUTH = {
    # another process holds all but 3 GiB: the device, not this process, is full
    "second_process": {"cycles": False, "oom_kind": "external"},
    # the batch doubles under a 3 GiB cap, the OOM is caught and raised again
    "oom_caught_reraised": {"cycles": False, "oom_kind": "process_cap"},
    # a worker thread appends 256 MiB tensors to a list until the 2 GiB cap
    "oom_worker_thread": {"cycles": False, "oom_kind": "capacity"},
    # every other 44 MiB block freed, a 600 MiB request that fits: no OOM, no cycles
    "fragmentation_cap": {"cycles": False},
}
SHARED_TRUTH = {
    "refcycle_simple": {"cycles": True, "oom_kind": "capacity"},  # cycles pile up to an 8 GiB cap
    "refcycle_gc_interval": {"cycles": True},  # gc.collect() every 20 iterations
    "leak_loss_history": {"cycles": False, "leak": True},  # loss_history.append(loss)
    "oom_training": {"cycles": False, "oom_kind": "process_cap"},  # batch doubled under a 6 GiB cap
    "oom_real": {"cycles": False, "oom_kind": "capacity"},  # 4 GiB tensors kept until the device is full
}
ANALYSES = ("cycles", "leaks", "oom")
CELLS = ("right", "cannot tell", "wrong")


@dataclass
class Score:
    file: str
    analysis: str
    stacks: str  # what the file's stacks carry: "all", "python" or "none"
    truth: str
    verdict: str
    confidence: str

    @property
    def cell(self) -> str:
        if self.verdict == self.truth:
            return "right"
        return "cannot tell" if self.confidence == "low" else "wrong"


def matrix_files() -> list[tuple[str, Path, dict]]:
    """(name, path, truth) of every file the matrix scores; shared ones only when present."""
    out = []
    for path in scenario_files():
        name = path.name.split(".pickle")[0]
        truth = truth_for(path)
        if truth.get("cycles") is None and truth.get("cause") == "training":
            truth = {**truth, "cycles": False}
        if truth.get("leak") is None and truth.get("cause") in NOT_LEAKS:
            truth = {**truth, "leak": False}
        out.append((name, path, truth))
    for name, truth in RECORDED_TRUTH.items():
        out.append((name, SAMPLES / "recorded" / f"{name}.pickle.xz", truth))
    for name, truth in SHARED_TRUTH.items():
        path = SHARED / f"{name}.pickle"
        if path.exists():
            out.append((name, path, truth))
    return out


def score_file(name: str, path: Path, truth: dict) -> list[Score]:
    _, _, leaks, cycles, ooms = verdicts(str(path))
    stacks = cycles.stacks
    out = []
    if truth.get("cycles") is not None:
        out.append(Score(name, "cycles", stacks, "cycles" if truth["cycles"] else "no cycles", cycles.verdict,
                         cycles.confidence))
    if truth.get("leak") is not None:
        out.append(Score(name, "leaks", stacks, "leak" if truth["leak"] else "no leak", leaks.verdict,
                         leaks.confidence))
    if truth.get("oom_kind"):
        for d in ooms:
            out.append(Score(name, "oom", stacks, truth["oom_kind"], d.verdict, d.confidence))
    return out


def all_scores() -> list[Score]:
    return [s for name, path, truth in matrix_files() for s in score_file(name, path, truth)]


def confusion_tables(scores: list[Score]) -> str:
    """Markdown: per analysis, rows are the truth, columns the verdicts, one table per kind
    of stacks; each cell counts files (an OOM counts once per `oom` entry)."""
    lines = []
    for analysis in ANALYSES:
        mine = [s for s in scores if s.analysis == analysis]
        verdicts = sorted({s.verdict for s in mine} | {s.truth for s in mine}, key=_order)
        for stacks in ("python", "all"):
            rows = [s for s in mine if s.stacks == stacks]
            if not rows:
                continue
            lines.append(f"`{analysis}`, stacks `{stacks}`:")
            lines.append("")
            lines.append("| truth \\ verdict | " + " | ".join(verdicts) + " |")
            lines.append("| --- |" + " ---: |" * len(verdicts))
            for truth in verdicts:
                cells = [sum(1 for s in rows if s.truth == truth and s.verdict == v) for v in verdicts]
                if any(cells):
                    lines.append(f"| {truth} | " + " | ".join(str(c) if c else "." for c in cells) + " |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _order(verdict: str) -> tuple[int, str]:
    last = ("cannot tell",)
    return (1 if verdict in last else 0, verdict)


def misses(scores: list[Score]) -> list[Score]:
    return [s for s in scores if s.cell != "right"]


if __name__ == "__main__":
    found = all_scores()
    sys.stdout.write(confusion_tables(found))
    sys.stdout.write("\nmisses:\n")
    for s in misses(found):
        sys.stdout.write(json.dumps(s.__dict__) + "\n")
