"""A stacked area plot of memory by category, in eighth-of-a-cell steps.

Pure numpy: returns per cell a character and the series drawn in its lower part (the
foreground) and above it (the background), so the timeline widget styles each cell with
two colours. A cell shows the series at its bottom edge filling as many eighths as it
covers (``▁``…``█``), and the series just above that boundary as the background. A series
thinner than an eighth of a row in a cell is not seen there (its bytes are still in the
legend and the breakdown).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EIGHTHS = " ▁▂▃▄▅▆▇█"
NONE = -1
# One colour per category, in memtui.analysis.categories order (parameters, gradients,
# optimizer_state, activations, temporaries, other, unknown), then for a user's own; the
# timeline and the breakdown views share them. Past the last, categories share it.
CATEGORY_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#76b7b2", "#bab0ac", "#9c755f",
                    "#edc948", "#b07aa1", "#ff9da7")


def category_css(widget: str, prefix: str) -> str:
    """``Widget > .prefix-K { color: ... }`` for every category colour (a DEFAULT_CSS part)."""
    return "\n".join(f"{widget} > .{prefix}-{k} {{ color: {c}; }}" for k, c in enumerate(CATEGORY_COLOURS))


@dataclass
class StackedRaster:
    chars: np.ndarray  # (rows, cols) of one-character strings, top row first
    fg: np.ndarray  # (rows, cols) series index drawn in the lower part, or NONE
    bg: np.ndarray  # (rows, cols) series index above it in the cell, or NONE


def stacked_raster(values: np.ndarray, rows: int, top: int) -> StackedRaster:
    """``values`` (series, columns) stacked from the first series up, scaled so ``top``
    fills ``rows`` rows."""
    n_series, cols = values.shape if values.ndim == 2 else (0, 0)
    chars = np.full((max(rows, 0), cols), " ", dtype="<U1")
    fg = np.full((max(rows, 0), cols), NONE, np.int64)
    bg = np.full((max(rows, 0), cols), NONE, np.int64)
    if rows <= 0 or cols == 0 or n_series == 0:
        return StackedRaster(chars, fg, bg)
    scale = rows * 8 / max(int(top), 1)
    # Upper edge of each series, in eighths of a row from the bottom.
    cum = np.cumsum(np.maximum(values, 0).astype(np.float64), axis=0)
    level = np.minimum(np.rint(cum * scale).astype(np.int64), rows * 8)
    cols_idx = np.arange(cols)
    for r in range(rows):
        base = (rows - 1 - r) * 8
        above = level > base  # (series, cols): series whose top is above this cell's bottom
        has = above.any(axis=0)
        lower = np.argmax(above, axis=0)
        filled = np.clip(level[lower, cols_idx] - base, 0, 8)
        boundary = base + filled
        above_boundary = level > boundary[None, :]
        upper = np.where(above_boundary.any(axis=0) & (filled < 8), np.argmax(above_boundary, axis=0), NONE)
        row_chars = np.array(list(EIGHTHS))[np.where(has, filled, 0)]
        chars[r] = row_chars
        fg[r] = np.where(has, lower, NONE)
        bg[r] = np.where(has, upper, NONE)
    return StackedRaster(chars, fg, bg)


def peak_points(curve: np.ndarray, cols: int) -> np.ndarray:
    """For each of ``cols`` equal slices of the trace, the event where ``curve`` is highest
    (so a column shows the composition of its spike, as the plain timeline shows its max)."""
    n = len(curve)
    if n == 0 or cols <= 0:
        return np.zeros(0, np.int64)
    starts = np.minimum((np.arange(cols, dtype=np.int64) * n) // cols, n - 1)
    ends = np.append(starts[1:], n)
    ends = np.maximum(ends, starts + 1)
    out = np.empty(cols, np.int64)
    for c in range(cols):
        s, e = int(starts[c]), int(ends[c])
        out[c] = s + int(np.argmax(curve[s:e]))
    return out
