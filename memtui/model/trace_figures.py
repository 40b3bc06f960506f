"""The figures every summary of a trace needs, from one pass over the whole of it: how many
events each action has, where the OOMs are, the first and last time, how many entries carry
forward frames.

At ten million events each figure is a pass over a column of 10-80 MB; one after the other on
one thread they were 60-80 ms of every ``memtui info``, warm or cold, whatever the cores. Here
the trace is cut into slices (model/slices.py) and every figure of a slice is worked out by
one task, on the cores the process may use, and the slices' figures are then put together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memtui.model import actions as act
from memtui.model.slices import on_slices
from memtui.model.trace import TraceColumns


@dataclass(frozen=True)
class TraceFigures:
    action_counts: np.ndarray  # events per action code (int64), as long as the highest code + 1
    oom_indices: np.ndarray  # the OOM entries' event indices, ascending
    time_span: tuple[float, float] | None  # the least and greatest time; None when no entry has one
    forward_frames: int  # entries that carry forward frames


def trace_figures(trace: TraceColumns) -> TraceFigures:
    action, time_us, fwd = trace.action, trace.time_us, trace.fwd

    def figures_of(start: int, stop: int) -> tuple[np.ndarray, np.ndarray, float, float, int]:
        actions, times = action[start:stop], time_us[start:stop]
        # fmin and fmax skip NaN (an entry without a time); a slice of none gives NaN
        return (np.bincount(actions), np.flatnonzero(actions == act.OOM) + start,
                float(np.fmin.reduce(times)), float(np.fmax.reduce(times)),
                int(np.count_nonzero(fwd[start:stop] >= 0)))

    parts = on_slices(len(action), figures_of)
    counts = np.zeros(max((len(p[0]) for p in parts), default=0), np.int64)
    for part in parts:
        counts[:len(part[0])] += part[0]
    low = min((p[2] for p in parts if not math.isnan(p[2])), default=math.nan)
    high = max((p[3] for p in parts if not math.isnan(p[3])), default=math.nan)
    span = (low, high) if math.isfinite(low) and math.isfinite(high) else None
    ooms = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    return TraceFigures(counts, ooms.astype(np.int64, copy=False), span, sum(p[4] for p in parts))
