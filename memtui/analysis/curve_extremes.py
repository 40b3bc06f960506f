"""The least and greatest value of a memory curve over slices of events, read from blocks.

Each column of the timeline stands for a slice of events and shows the least and greatest
bytes in it (memtui/tui/views/plot.py). Reduced from the curve itself, a plot passes over
every event: 20 ms at ten million events, on the thread that draws, at the first screen and
at every change of the terminal's size. The least and greatest value of each block of
BLOCK events are made once instead, where the view is prepared (off that thread), and a
slice is then read from the blocks it covers whole and from the few events at its two ends:
the same values, at a cost that does not grow with the trace. The greatest of the blocks is
the curve's peak, which the first screen shows too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

# Events per block: the ends of a slice read at most 2 * BLOCK events, the blocks are
# 1/BLOCK of the curve (four arrays of 40,000 at ten million events).
BLOCK = 256


def block_count(n_events: int) -> int:
    """Blocks of a curve of ``n_events`` (the last may be short)."""
    return -(-n_events // BLOCK)


@dataclass(frozen=True)
class CurveExtremes:
    """A curve with the least and greatest value of each of its blocks of BLOCK events."""

    curve: np.ndarray
    lows: np.ndarray  # least value of each block (the last block may be shorter); none: not made
    highs: np.ndarray  # greatest value of each block

    @classmethod
    def of(cls, curve: np.ndarray) -> CurveExtremes:
        if not len(curve):
            return cls(curve, curve[:0], curve[:0])
        starts = np.arange(0, len(curve), BLOCK)
        return cls(curve, np.minimum.reduceat(curve, starts), np.maximum.reduceat(curve, starts))

    @cached_property
    def peak(self) -> int | None:
        """The greatest value of the curve (None for an empty one)."""
        return int(self.highs.max()) if len(self.highs) else None

    def over(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The least and greatest value over each slice from ``starts[k]`` to the next start
        (the last to the curve's end): what ``np.minimum.reduceat(curve, starts)`` and
        ``np.maximum.reduceat`` give, a start that does not come before the next one included.
        Slices of fewer than two blocks, or a curve without its blocks, are reduced from the
        curve itself."""
        curve, n = self.curve, len(self.curve)
        starts = np.asarray(starts, np.int64)
        ends = np.append(starts[1:], n)
        if not len(self.lows) or not len(starts) or int((ends - starts).min()) < 2 * BLOCK:
            return np.minimum.reduceat(curve, starts), np.maximum.reduceat(curve, starts)
        first_block = -(-starts // BLOCK)  # the first block that starts inside the slice
        end_block = ends // BLOCK  # the block after the last that ends inside it
        # Whole blocks: a reduceat over [first_block, end_block, first_block', ...] whose
        # every other result is a slice's blocks (those between are a block or none, and are
        # dropped); the last slice's blocks run to the blocks' end, a short block included,
        # which lies in the slice.
        pairs = np.column_stack([first_block, end_block]).ravel()[:-1]
        inner_lo = np.minimum.reduceat(self.lows, pairs)[::2]
        inner_hi = np.maximum.reduceat(self.highs, pairs)[::2]
        # The events before the first whole block and after the last: at most BLOCK - 1 at
        # each end, gathered with every place past an end clipped back into the slice.
        offsets = np.arange(BLOCK)
        head = np.minimum(starts[:, None] + offsets, np.maximum(first_block * BLOCK - 1, starts)[:, None])
        tail_start = np.minimum(end_block * BLOCK, ends - 1)
        tail = np.minimum(tail_start[:, None] + offsets, (ends - 1)[:, None])
        ends_values = curve[np.concatenate([head, tail], axis=1)]
        low = np.minimum(inner_lo, ends_values.min(axis=1))
        high = np.maximum(inner_hi, ends_values.max(axis=1))
        return low.astype(curve.dtype, copy=False), high.astype(curve.dtype, copy=False)
