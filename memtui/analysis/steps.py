"""Where the iterations of a run are in a trace.

Training loops leave ``external_annotations`` (``Optimizer.step#AdamW.step`` START/END,
``Optimizer.zero_grad#...``, or numbered markers such as ``memtui.step#12``): the name
that repeats most marks one point per iteration. Without them, a loop still shows in the
trace: the allocation stack that repeats most (a line of the loop's body, reached the same
way each time) marks one point per execution, just before it, when the previous
execution's temporaries are gone. With no stacks either, the trace is cut into equal time
windows (or equal event windows when it has no times).

A point is an event index: "the state after this event".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act

MIN_ANNOTATED_STEPS = 3
# Markers that number their steps (memtui.step#12, train_step_12) form one series.
_STEP_NUMBER = re.compile(r"(#|step[ _\-.]?)\d+$", re.IGNORECASE)
DEFAULT_WINDOWS = 10


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

    def to_json(self) -> dict:
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


def iteration_marks(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, str, np.ndarray] | None:
    """Every iteration's point: (kind, name, event indices), from step annotations, else
    from the most repeated allocation stack; None when neither marks at least
    MIN_ANNOTATED_STEPS iterations."""
    annotated = _annotated_points(snapshot, dev)
    if annotated is not None:
        return ("annotation",) + annotated
    repeated = _repeated_stack_points(snapshot, dev)
    if repeated is not None:
        return ("iterations",) + repeated
    return None


def _repeated_stack_points(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    trace = dev.trace
    allocs = np.flatnonzero((trace.action == act.ALLOC) & (trace.stack >= 0))
    if len(allocs) < MIN_ANNOTATED_STEPS:
        return None
    stacks, first, counts = np.unique(trace.stack[allocs], return_index=True, return_counts=True)
    # The most repeated stack; of equals, the one that comes first in the trace.
    best = int(np.lexsort((first, -counts))[0])
    if counts[best] < MIN_ANNOTATED_STEPS:
        return None
    at = allocs[trace.stack[allocs] == stacks[best]]
    return snapshot.stacks.top_frame_text(int(stacks[best])), np.maximum(at - 1, 0).astype(np.int64)


def step_boundaries(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    """The step annotation's name and the event index of every one of its points, or None."""
    return _annotated_points(snapshot, dev)


def _annotated_points(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    times = dev.trace.time_us
    if len(times) == 0 or not np.isfinite(times).all():
        return None
    mine = [a for a in snapshot.annotations if a.device == dev.device and np.isfinite(a.time_us)]
    ends = [a for a in mine if a.stage == "END"] or mine
    counts = Counter(series_name(a.name) for a in ends)
    if not counts:
        return None
    most = max(counts.values())
    if most < MIN_ANNOTATED_STEPS:
        return None
    # Between names marking every iteration, the one coming last in the iteration sees
    # the iteration's transient memory already gone.
    first_time = {}
    for a in ends:
        first_time.setdefault(series_name(a.name), a.time_us)
    name = max((n for n, c in counts.items() if c == most), key=lambda n: first_time[n])
    marks = np.sort(np.array([a.time_us for a in ends if series_name(a.name) == name]))
    indices = np.searchsorted(np.maximum.accumulate(times), marks, "right") - 1
    indices = indices[indices >= 0]
    if len(indices) < MIN_ANNOTATED_STEPS:
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
