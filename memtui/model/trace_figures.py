"""The figures summaries of a trace need, each one pass over a whole column: how many events
each action has, where the OOMs are, the first and last time, which actions carry a stack,
how many entries carry forward frames, how many allocations are never freed.

At ten million events each is a pass over a column of 10-80 MB; one after the other on one
thread they were 60-80 ms of every ``memtui info``, warm or cold, whatever the cores. The
counts, the OOMs, the times and the forward frames are compiled passes on the cores the
process may use (model/column_passes.py); the others cut their columns into slices
(model/slices.py), each slice's figure worked out by one task on those cores, then put
together. Each is its own pass, so a view asks only for what it shows (the explorer's first
screen wants the OOMs, not the counts); the device model keeps each once computed.
"""

from __future__ import annotations

import math

import numpy as np

from memtui.model import actions as act
from memtui.model import column_passes
from memtui.model.slices import on_slices


def action_counts(action: np.ndarray) -> np.ndarray:
    """Events per action code (int64), as long as the highest code + 1."""
    return column_passes.code_counts(action)


def oom_indices(action: np.ndarray) -> np.ndarray:
    """The OOM entries' event indices, ascending (int64)."""
    return column_passes.positions(action, (act.OOM,))


def time_span(time_us: np.ndarray) -> tuple[float, float] | None:
    """The least and greatest time; None when no entry has one (a missing time is NaN)."""
    low, high = column_passes.time_span(time_us)
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def stacked_actions(action: np.ndarray, stack: np.ndarray) -> list[int]:
    """The action codes of the entries that carry a stack, ascending, each once (codes are
    small and never negative: counted, not sorted; np.unique sorted ten million of them,
    50 ms)."""
    def codes(start: int, stop: int) -> np.ndarray:
        stacked = action[start:stop][stack[start:stop] >= 0]
        return np.bincount(stacked) if len(stacked) else np.zeros(0, np.int64)

    parts = on_slices(len(action), codes)
    present = np.zeros(max((len(part) for part in parts), default=0), bool)
    for part in parts:
        present[:len(part)] |= part > 0
    return [int(code) for code in np.flatnonzero(present)]


def forward_frames(fwd: np.ndarray) -> int:
    """Entries that carry forward frames (a frame list's id, else -1)."""
    if not has_forward_frames(fwd):
        return 0  # most traces: one compiled pass for the bounds, no count
    return sum(on_slices(len(fwd), lambda start, stop: int(np.count_nonzero(fwd[start:stop] >= 0))))


def has_forward_frames(fwd: np.ndarray) -> bool:
    """Whether any entry carries forward frames."""
    span = column_passes.bounds(fwd)
    return span is not None and span[1] >= 0


def never_freed(start: np.ndarray, end: np.ndarray) -> int:
    """Lives that start in the trace and never end (-1 marks no event)."""
    return sum(on_slices(len(start), lambda a, b: int(np.count_nonzero((start[a:b] != -1) & (end[a:b] == -1)))))
