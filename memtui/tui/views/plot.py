"""A braille plot of two memory curves, reduced to min/max per column so no spike is lost.

Pure numpy: returns characters and a per-cell series flag; the timeline widget styles them.
Braille cells are 2 dots wide and 4 high, so a ``w``-column, ``h``-row plot has
``2w`` x ``4h`` dots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.curve_extremes import CurveExtremes

# Bit of each dot in a braille cell, [dot row from the top][dot column].
_DOT_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], np.int64)
BRAILLE_BASE = 0x2800

# What a cell shows, strongest first wins: the band between a column's min and max of the
# filled curve, the area under its min, the line curve, nothing.
EMPTY, LINE, FILL, BAND = 0, 1, 2, 3


@dataclass
class Raster:
    chars: list[str]  # one string per row, top row first
    kind: np.ndarray  # (rows, cols) of EMPTY / LINE / FILL / BAND


def bucket_starts(n: int, buckets: int) -> np.ndarray:
    """First event of each of ``buckets`` equal slices of ``n`` events (repeats when n < buckets)."""
    return np.minimum((np.arange(buckets, dtype=np.int64) * n) // buckets, max(n - 1, 0))


def column_of_event(i: int, n: int, cols: int) -> int:
    return min(cols - 1, max(0, i * cols // max(n, 1)))


def event_of_column(c: int, n: int, cols: int) -> int:
    return min(n - 1, max(0, (c * n + cols // 2) // max(cols, 1)))


def raster(fill: np.ndarray | CurveExtremes, line: np.ndarray | CurveExtremes, cols: int, rows: int,
           top: int) -> Raster:
    """``fill`` as an area (solid to each column's min, a band up to its max); ``line`` as a
    line. Each is a curve, or a curve with its blocks' extremes (read, not reduced, per column)."""
    if cols <= 0 or rows <= 0:
        return Raster([""] * max(rows, 0), np.zeros((max(rows, 0), max(cols, 0)), np.int8))
    fill, line = _extremes(fill), _extremes(line)
    n = len(fill.curve)
    sub = cols * 2
    dots = rows * 4
    if n == 0:
        return Raster([chr(BRAILLE_BASE) * cols] * rows, np.zeros((rows, cols), np.int8))
    starts = bucket_starts(n, sub)
    top = max(int(top), 1)
    fill_lo, fill_hi = (_level(v, top, dots) for v in fill.over(starts))
    line_lo, line_hi = (_level(v, top, dots) for v in line.over(starts))
    # Height of each dot row above the bottom, from the top row down: dots .. 1.
    height = dots - np.arange(dots)[:, None]
    fill_on = height <= fill_lo[None, :]
    # The band is stippled (every other dot row) so it reads apart from the solid area
    # even without colour.
    band_on = (height > fill_lo[None, :]) & (height <= fill_hi[None, :]) & (height % 2 == 0)
    line_on = (height >= np.maximum(line_lo, 1)[None, :]) & (height <= line_hi[None, :])
    bits_fill = _cell_bits(fill_on, rows, cols)
    bits_band = _cell_bits(band_on, rows, cols)
    bits_line = _cell_bits(line_on, rows, cols)
    bits = bits_fill | bits_band | bits_line
    kind = np.select([bits_band > 0, bits_fill > 0, bits_line > 0], [BAND, FILL, LINE], EMPTY).astype(np.int8)
    chars = ["".join(chr(BRAILLE_BASE + int(b)) for b in row) for row in bits]
    return Raster(chars, kind)


def _extremes(curve: np.ndarray | CurveExtremes) -> CurveExtremes:
    """A curve's extremes as given, else with no blocks (every slice is reduced from the curve)."""
    if isinstance(curve, CurveExtremes):
        return curve
    return CurveExtremes(curve, curve[:0], curve[:0])


def _level(values: np.ndarray, top: int, dots: int) -> np.ndarray:
    """Dot height of each value: 0 for nothing, at least 1 for anything above zero."""
    v = np.asarray(values, np.float64)
    level = np.ceil(v / top * dots).astype(np.int64)
    return np.clip(level, 0, dots)


def _cell_bits(on: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(dots, 2*cols) booleans → (rows, cols) braille bit masks."""
    cells = on.reshape(rows, 4, cols, 2)
    return np.einsum("rkcj,kj->rc", cells.astype(np.int64), _DOT_BITS)
