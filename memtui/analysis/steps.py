"""Where the iterations of a run are in a trace.

Training loops leave ``external_annotations`` (``Optimizer.step#AdamW.step`` START/END,
``Optimizer.zero_grad#...``, or numbered markers such as ``memtui.step#12``): the name
that repeats most marks one point per iteration. An optimizer's or a numbered marker's
count is the number of steps even when it is one or two (a file holding one traced step
has one step, however often a line repeats inside it). torch.compile's own spans
(``pad_mm_benchmark (dynamo_timed)``) time the compiler, never a step.

Without annotations, a loop still shows in the trace: the program leaves the loop's
statement and comes back to it. Each allocation's *loop-level statement* is the chain of
the user's own frames from the outermost inward, cut where torch's code begins (a module
call, an optimizer, autograd): the line of the script that called into torch. The
statement that the program returns to most often marks one point per iteration, just
before it starts again, when the previous iteration's temporaries are gone. A line that
repeats only inside one call (a model's layers inside one forward, an optimizer's loop
over its parameters, a list comprehension) never returns at that level, so it marks
nothing. A loop whose body is one statement (``loss = model(x).mean()``) never leaves it
either: there, each execution of its most repeated stack of the user's own frames is a
point, if other allocations come among its executions (a list comprehension's, or a
loop's that only appends one tensor, come back to back: one statement repeated). Without
either, the trace is cut into equal time windows (or equal event windows when it has no
times), and a window is not an iteration.

A point is an event index: "the state after this event".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act

MIN_ANNOTATED_STEPS = 3
# Markers that number their steps (memtui.step#12, train_step_12) form one series.
_STEP_NUMBER = re.compile(r"(#|step[ _\-.]?)\d+$", re.IGNORECASE)
# Annotations that mark one step each however few there are: the optimizer's own spans.
_STEP_SPANS = ("Optimizer.step#", "Optimizer.zero_grad#")
# torch.compile times its passes with annotations of this form: compiler work, not steps.
_COMPILER_SPAN = "(dynamo_timed)"
DEFAULT_WINDOWS = 10
# Where a time window's point lies, as the texts say it: windows without an event share the
# point before them (step_points keeps each distinct one).
TIME_WINDOW_POINT = "one at the end of each time window that holds events"


@dataclass
class StepPoints:
    kind: str  # "annotation", "iterations", "time" or "events"
    name: str | None  # the annotation that marks steps, or the line whose executions do
    indices: np.ndarray  # event index of each point, ascending
    steps: int  # how many iterations the points stand for (annotation count, or windows)
    positions: np.ndarray | None = None  # step number of each point (points may skip steps)

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def unit(self) -> str:
        return {"annotation": "step", "iterations": "iteration"}.get(self.kind, "window")

    def units_between_ends(self) -> int:
        """Steps (or windows) from the first point to the last."""
        if len(self.indices) < 2:
            return 0
        if self.positions is not None:
            return int(self.positions[-1] - self.positions[0])
        return len(self.indices) - 1

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "steps": self.steps,
                "indices": [int(i) for i in self.indices]}


def step_points(snapshot: Snapshot, dev: DeviceModel, max_points: int = 24,
                windows: int = DEFAULT_WINDOWS) -> StepPoints:
    """Sample points, at most ``max_points`` of them, evenly spread over the steps."""
    n = len(dev.trace)
    marks = iteration_marks(snapshot, dev)
    if marks is not None:
        kind, name, indices = marks
        picked = _thin(len(indices), max_points)
        return StepPoints(kind, name, indices[picked], len(indices), picked)
    times = dev.trace.time_us
    windows = max(2, min(windows, max_points))
    if n and np.isfinite(times).all() and times[-1] > times[0]:
        edges = times[0] + (times[-1] - times[0]) * np.arange(1, windows + 1) / windows
        indices = np.searchsorted(np.maximum.accumulate(times), edges, "right") - 1
        return StepPoints("time", None, np.unique(np.clip(indices, 0, n - 1)), windows)
    indices = np.unique(np.clip((np.arange(1, windows + 1) * n) // windows - 1, 0, max(n - 1, 0))) if n else \
        np.zeros(0, np.int64)
    return StepPoints("events", None, indices, windows)


# An iteration's kind ('annotation' or 'iterations'), its name, and the event index of each.
IterationMarks = tuple[str, str, np.ndarray]


def iteration_marks(snapshot: Snapshot, dev: DeviceModel) -> IterationMarks | None:
    """Every iteration's point: (kind, name, event indices), from step annotations, else
    from the most repeated allocation stack; None when neither marks at least
    MIN_ANNOTATED_STEPS iterations."""
    annotated = _annotated_points(snapshot, dev)
    if annotated is not None:
        return ("annotation",) + annotated
    few = _few_step_annotations(snapshot, dev)
    if few is not None:
        return ("annotation",) + few
    repeated = _loop_points(snapshot, dev)
    if repeated is not None:
        return ("iterations",) + repeated
    return None


def _loop_points(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    """The start of every return to the loop-level statement returned to most often (module docstring)."""
    trace = dev.trace
    allocs = np.flatnonzero((trace.action == act.ALLOC) & (trace.stack >= 0))
    if len(allocs) < MIN_ANNOTATED_STEPS:
        return None
    stacks, stack_of_alloc = np.unique(trace.stack[allocs], return_inverse=True)
    keys, plain, statement_frame = _loop_statements(snapshot, stacks)
    key = keys[stack_of_alloc]
    kept = key >= 0
    starts = allocs[kept]
    seq = key[kept]
    if len(seq):
        change = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
        run_keys = seq[change]
        values, first, runs = np.unique(run_keys, return_index=True, return_counts=True)
        best = int(np.lexsort((first, -runs))[0])
        if runs[best] >= MIN_ANNOTATED_STEPS and len(values) > 1:
            at = starts[change[run_keys == values[best]]]
            text = snapshot.stacks.frames.label_text(statement_frame[int(values[best])])
            return text, np.maximum(at - 1, 0).astype(np.int64)
    return _one_statement_loop(snapshot, dev, allocs[plain[stack_of_alloc]])


def _one_statement_loop(snapshot: Snapshot, dev: DeviceModel, own: np.ndarray) -> tuple[str, np.ndarray] | None:
    """A loop whose body is one statement of the user's own code (``loss = model(x).mean()``
    on one line): its most repeated stack of the user's frames only, each execution one
    point, when other allocations come among its executions. Executions back to back with
    no other allocation among them (a list comprehension, or a loop that only appends one
    tensor) are one statement repeated, not iterations told apart."""
    if not len(own):
        return None
    trace = dev.trace
    ids, first, counts = np.unique(trace.stack[own], return_index=True, return_counts=True)
    best = int(np.lexsort((first, -counts))[0])
    if counts[best] < MIN_ANNOTATED_STEPS:
        return None
    at = own[trace.stack[own] == ids[best]]
    # Executions back to back, no other allocation among them: one statement repeated.
    others = np.cumsum((trace.action == act.ALLOC) & (trace.stack != ids[best]))
    if others[at[-1]] == others[at[0]]:
        return None
    return snapshot.stacks.top_frame_text(int(ids[best])), np.maximum(at - 1, 0).astype(np.int64)


def _loop_statements(snapshot: Snapshot, stacks: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per stack: an id of its loop-level statement (the user's frames from the outermost
    in, up to where torch's code begins; -1 for a stack with no Python frame), and whether
    the stack is the user's own code only; and per statement id, its innermost frame (the
    line that called into torch)."""
    frames = snapshot.stacks.frames
    ids: dict[tuple[int, ...], int] = {}
    keys = np.full(len(stacks), -1, np.int64)
    plain = np.zeros(len(stacks), bool)
    statement_frame: list[int] = []
    for k, sid in enumerate(stacks.tolist()):
        fids = snapshot.stacks.frame_ids(int(sid))
        python = fids[~frames.native[fids]][::-1]  # outermost first
        if not len(python):
            continue
        user = frames.user[python]
        cut = int(np.argmin(user)) if not user.all() else len(python)
        plain[k] = cut == len(python)
        outer = tuple(int(f) for f in python[:cut])
        if not outer:
            continue
        if outer not in ids:
            ids[outer] = len(ids)
            statement_frame.append(outer[-1])
        keys[k] = ids[outer]
    return keys, plain, statement_frame


def step_boundaries(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    """The step annotation's name and the event index of every one of its points, or None."""
    return _annotated_points(snapshot, dev)


def _few_step_annotations(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    """One or two optimizer steps (or numbered markers): the run's steps, too few to sample
    growth by, which a line repeating inside them must not stand in for."""
    found = _annotated_points(snapshot, dev, minimum=1)
    if found is None:
        return None
    name = found[0]
    if name.startswith(_STEP_SPANS) or name.endswith("#N") or "step" in name.lower():
        return found
    return None


def _annotated_points(snapshot: Snapshot, dev: DeviceModel,
                      minimum: int = MIN_ANNOTATED_STEPS) -> tuple[str, np.ndarray] | None:
    times = dev.trace.time_us
    if len(times) == 0 or not np.isfinite(times).all():
        return None
    mine = [a for a in snapshot.annotations if a.device == dev.device and np.isfinite(a.time_us)
            and not a.name.endswith(_COMPILER_SPAN)]
    ends = [a for a in mine if a.stage == "END"] or mine
    counts = Counter(series_name(a.name) for a in ends)
    if not counts:
        return None
    most = max(counts.values())
    if most < minimum:
        return None
    # Between names marking every iteration, the one coming last in the iteration sees
    # the iteration's transient memory already gone.
    first_time: dict[str, float] = {}
    for a in ends:
        first_time.setdefault(series_name(a.name), a.time_us)
    name = max((n for n, c in counts.items() if c == most), key=lambda n: first_time[n])
    marks = np.sort(np.array([a.time_us for a in ends if series_name(a.name) == name]))
    indices = np.searchsorted(np.maximum.accumulate(times), marks, "right") - 1
    indices = indices[indices >= 0]
    if len(indices) < minimum:
        return None
    return name, indices.astype(np.int64)


def series_name(name: str) -> str:
    """The name shared by numbered step markers: ``memtui.step#12`` -> ``memtui.step#N``."""
    return _STEP_NUMBER.sub(r"\1N", name)


def _thin(count: int, limit: int) -> np.ndarray:
    """Positions of at most ``limit`` of ``count`` points, evenly spread, first and last kept."""
    if count <= limit:
        return np.arange(count, dtype=np.int64)
    return np.unique(np.rint(np.linspace(0, count - 1, limit)).astype(np.int64))
