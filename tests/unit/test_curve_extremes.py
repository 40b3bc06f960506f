"""The timeline's columns read from blocks give what a reduction over the curve gives.

A column's least and greatest bytes come from the blocks its slice covers whole and from the
events at its two ends (memtui/analysis/curve_extremes.py). Compared here with numpy's
reduceat over the curve itself, for every way a slice can meet the blocks: starts and ends
on a block's edge or inside one, a last block shorter than the others, slices too short to
read from blocks, starts that repeat.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui.analysis.curve_extremes import BLOCK, CurveExtremes
from memtui.tui.views.plot import bucket_starts, raster


def _expected(curve: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.minimum.reduceat(curve, starts), np.maximum.reduceat(curve, starts)


def _assert_same(curve: np.ndarray, starts: np.ndarray) -> None:
    low, high = CurveExtremes.of(curve).over(starts)
    want_low, want_high = _expected(curve, starts)
    np.testing.assert_array_equal(low, want_low)
    np.testing.assert_array_equal(high, want_high)
    assert low.dtype == curve.dtype and high.dtype == curve.dtype


@given(n=st.integers(1, 40 * BLOCK), columns=st.integers(1, 60), seed=st.integers(0, 2**32 - 1))
def test_the_plots_slices_match_a_reduction_over_the_curve(n: int, columns: int, seed: int) -> None:
    curve = np.random.default_rng(seed).integers(-(2**40), 2**40, n)
    _assert_same(curve, bucket_starts(n, columns))


@pytest.mark.parametrize("n", [2 * BLOCK, 2 * BLOCK + 1, 10 * BLOCK, 10 * BLOCK - 1, 10 * BLOCK + 1])
@pytest.mark.parametrize("offset", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1])
def test_slices_on_and_off_the_blocks_edges(n: int, offset: int) -> None:
    """Slices at least two blocks long (read from blocks), starting on an edge or beside it."""
    curve = np.random.default_rng(n + offset).integers(0, 1 << 30, n + offset + 4 * BLOCK)
    _assert_same(curve, np.array([0, 2 * BLOCK + offset, 4 * BLOCK + offset]))


def test_slices_of_two_blocks_or_more_are_read_from_the_blocks() -> None:
    """Blocks that lie (a least value no event has) show in the answer: the blocks are read;
    a slice shorter than two blocks is not read from them."""
    curve = np.full(8 * BLOCK, 5, np.int64)
    made = CurveExtremes.of(curve)
    lying = CurveExtremes(curve, np.full_like(made.lows, -1), made.highs)
    assert lying.over(np.array([0, 4 * BLOCK]))[0].tolist() == [-1, -1]
    assert lying.over(np.array([0, 4 * BLOCK, 4 * BLOCK + 1]))[0].tolist() == [5, 5, 5]


def test_a_peak_or_a_dip_anywhere_is_found() -> None:
    """One event above or below all others, at every place in turn: at the ends of a slice
    (outside its whole blocks), on a block's edge, in a short last block."""
    n = 9 * BLOCK + 17
    curve = np.full(n, 1000, np.int64)
    starts = np.array([0, 3 * BLOCK + 5, 6 * BLOCK])
    made = CurveExtremes.of(curve)
    for at in range(n):
        for value in (5000, 1):
            changed = curve.copy()
            changed[at] = value
            lows, highs = made.lows.copy(), made.highs.copy()
            lows[at // BLOCK], highs[at // BLOCK] = min(value, 1000), max(value, 1000)
            low, high = CurveExtremes(changed, lows, highs).over(starts)
            want_low, want_high = _expected(changed, starts)
            assert low.tolist() == want_low.tolist() and high.tolist() == want_high.tolist(), (at, value)


def test_repeated_starts_and_a_short_curve_are_reduced_from_the_curve() -> None:
    curve = np.arange(10, dtype=np.int64)
    _assert_same(curve, bucket_starts(10, 25))  # more columns than events: starts repeat
    _assert_same(curve[:1], np.zeros(4, np.int64))


def test_a_memory_mapped_curve_is_read_as_it_is(tmp_path) -> None:
    values = np.random.default_rng(7).integers(0, 1 << 40, 50 * BLOCK + 3)
    np.save(tmp_path / "c.npy", values)
    mapped = np.load(tmp_path / "c.npy", mmap_mode="r")
    _assert_same(mapped, bucket_starts(len(values), 13))


def test_the_peak_is_the_curves_greatest_value() -> None:
    curve = np.random.default_rng(3).integers(0, 1 << 40, 7 * BLOCK + 1)
    assert CurveExtremes.of(curve).peak == int(curve.max())
    assert CurveExtremes.of(curve[:0]).peak is None


def test_the_raster_from_blocks_is_the_raster_from_the_curves() -> None:
    rng = np.random.default_rng(11)
    allocated = np.cumsum(rng.integers(-(1 << 20), 1 << 20, 300 * BLOCK + 77))
    reserved = np.maximum.accumulate(allocated) + (1 << 24)
    top = int(reserved.max())
    for cols, rows in [(110, 6), (37, 3), (300, 10)]:
        plain = raster(allocated, reserved, cols, rows, top)
        read = raster(CurveExtremes.of(allocated), CurveExtremes.of(reserved), cols, rows, top)
        assert read.chars == plain.chars
        np.testing.assert_array_equal(read.kind, plain.kind)
