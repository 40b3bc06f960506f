"""The compiled passes over whole columns (src/memtui_native/columns.c) give numpy's answers,
value for value and type for type: on generated columns of every width, on the edges (no
rows, one row, ids counted from the end, ids outside the table, no time at all, infinite
times), on one thread and on many, and on every real file's model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import memtui.model.column_passes as passes
from memtui.model import trace_figures
from tests.conftest import sample_files, shared_params
from tests.fixtures.opened import cached

pytestmark = pytest.mark.skipif(passes._native is None, reason="built without a C compiler")

WIDTHS = [np.int8, np.int16, np.int32, np.int64]


@pytest.fixture(params=[(1, 0), (5, 0), (5, 7)], ids=["one core", "five cores", "five cores, parts of 7 rows"])
def cores(request, monkeypatch):
    """The cores the passes may use, and where given, parts of that many rows (a million
    otherwise): every column of more than a few rows is then cut into parts."""
    count, part_rows = request.param
    monkeypatch.setattr(passes, "usable_cores", lambda: count)
    if part_rows:
        old = passes._native._part_rows(part_rows)
        yield count
        passes._native._part_rows(old)
    else:
        yield count


def _both(monkeypatch, compute):
    """``compute()`` by the compiled passes and by numpy."""
    monkeypatch.setattr(passes, "use_native", True)
    compiled = compute()
    monkeypatch.setattr(passes, "use_native", False)
    return compiled, compute()


def _same(a, b):
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    elif isinstance(a, tuple) and a and isinstance(a[0], float):
        assert all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))
    else:
        assert a == b


# Rows from none to several parts of 65,536 (the compiled passes cut a column there).
ROWS = [0, 1, 3, 4, 5, 70_000, 200_003]


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("id_width", WIDTHS)
@pytest.mark.parametrize("table_width", WIDTHS)
def test_a_lookup_and_its_bounds_are_numpys(rows, id_width, table_width, cores, monkeypatch):
    rng = np.random.default_rng(rows * 31 + np.dtype(id_width).itemsize * 7 + np.dtype(table_width).itemsize)
    info = np.iinfo(table_width)
    table = rng.integers(info.min, info.max, 40, dtype=np.int64, endpoint=True).astype(table_width)
    ids = rng.integers(-40, 40, rows).astype(id_width)  # negative: from the end, as Python indexes

    def looked_up():
        out = np.empty(rows, table_width)
        return passes.remap(ids, table, out), out

    (span, out), (plain_span, plain_out) = _both(monkeypatch, looked_up)
    assert span == plain_span and np.array_equal(out, plain_out)
    assert np.array_equal(out, table[ids]) if rows else span is None


@pytest.mark.parametrize("bad", [40, -41, 127])
def test_an_id_outside_the_table_is_refused_by_both(bad, cores, monkeypatch):
    table = np.arange(40, dtype=np.int16)
    ids = np.zeros(100_000, np.int8)
    ids[77_777] = bad
    for native in (True, False):
        monkeypatch.setattr(passes, "use_native", native)
        with pytest.raises(passes.OutsideTable):
            passes.remap(ids, table, np.empty(len(ids), np.int16))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_bounds_of_a_column_are_numpys(rows, width, cores, monkeypatch):
    rng = np.random.default_rng(rows + np.dtype(width).itemsize)
    info = np.iinfo(width)
    column = rng.integers(info.min, info.max, rows, dtype=np.int64, endpoint=True).astype(width)
    compiled, plain = _both(monkeypatch, lambda: passes.bounds(column))
    assert compiled == plain
    if rows >= 2:
        column[rows // 2] = info.min  # the extremes themselves
        column[-1] = info.max
        assert _both(monkeypatch, lambda: passes.bounds(column)) == ((info.min, info.max),) * 2


def _times(rows, seed, nan_share=0.1, inf_share=0.01):
    rng = np.random.default_rng(seed)
    times = rng.normal(1e9, 1e6, rows)
    times[rng.random(rows) < nan_share] = np.nan
    times[rng.random(rows) < inf_share / 2] = np.inf
    times[rng.random(rows) < inf_share / 2] = -np.inf
    return times


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("shares", [(0.1, 0.01), (1.0, 0.0), (0.0, 0.0), (0.5, 0.5)],
                         ids=["some missing", "none", "all", "half infinite"])
def test_times_are_made_finite_and_spanned_as_by_numpy(rows, shares, cores, monkeypatch):
    def finite():
        times = _times(rows, rows, *shares)
        passes.finite_times(times)
        return times

    compiled, plain = _both(monkeypatch, finite)
    _same(compiled, plain)
    assert not np.isinf(compiled).any()
    for times in (_times(rows, rows + 1, *shares), compiled):  # with and without infinities
        _same(*_both(monkeypatch, lambda: passes.time_span(times)))  # noqa: B023 - called at once


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("width", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("highest", [0, 11, 127])
def test_counts_and_positions_of_codes_are_numpys(rows, width, highest, cores, monkeypatch):
    rng = np.random.default_rng(rows + highest)
    codes = rng.integers(0, highest + 1, rows).astype(width)
    _same(*_both(monkeypatch, lambda: passes.code_counts(codes)))
    for wanted in [(), (0,), (highest,), (3, 7, 300), (-5, 2)]:
        _same(*_both(monkeypatch, lambda: passes.positions(codes, wanted)))  # noqa: B023 - called at once
    counts = passes.code_counts(codes)
    assert counts.flags.writeable  # as numpy's own


@pytest.mark.parametrize("width", [np.int8, np.int16])
def test_a_negative_code_is_refused_by_both_counts(width, cores, monkeypatch):
    codes = np.zeros(100_000, width)
    codes[99_999] = -1
    for native in (True, False):
        monkeypatch.setattr(passes, "use_native", native)
        with pytest.raises(ValueError):
            passes.code_counts(codes)


def every_real_file():
    return shared_params("*.pickle*") + [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]


@pytest.mark.parametrize("path", every_real_file())
def test_the_figures_of_every_real_file_are_numpys(path, monkeypatch):
    snap = cached(str(path))
    for dev in snap.devices:
        trace = dev.trace
        for figure, args in ((trace_figures.action_counts, (trace.action,)),
                             (trace_figures.oom_indices, (trace.action,)),
                             (trace_figures.time_span, (trace.time_us,)),
                             (trace_figures.forward_frames, (trace.fwd,)),
                             (passes.bounds, (trace.addr,)), (passes.bounds, (trace.stack,))):
            compiled, plain = _both(monkeypatch, lambda: figure(*args))  # noqa: B023 - called at once
            if isinstance(compiled, np.ndarray):
                _same(compiled, plain)
            else:
                assert compiled == plain


def test_strided_columns_get_the_same_answers(monkeypatch):
    # A view of every other row is not one contiguous array: it takes numpy's way, with the
    # same answers as its contiguous copy gives by the compiled passes.
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 12, 300_001).astype(np.int8)
    times = _times(300_001, 7)
    for view in (codes[::2], codes[::-1]):
        copy = np.ascontiguousarray(view)
        assert passes.bounds(view) == passes.bounds(copy)
        _same(passes.code_counts(view), passes.code_counts(copy))
        _same(passes.positions(view, (3,)), passes.positions(copy, (3,)))
    _same(passes.time_span(times[::3]), passes.time_span(np.ascontiguousarray(times[::3])))
    table = np.arange(12, dtype=np.int16)
    out, out_copy = np.empty(150_001, np.int16), np.empty(150_001, np.int16)
    assert passes.remap(codes[::2], table, out) == passes.remap(np.ascontiguousarray(codes[::2]), table, out_copy)
    assert np.array_equal(out, out_copy)
    strided = times.copy()[::2]
    passes.finite_times(strided)
    assert not np.isinf(strided).any()


def test_any_id_into_an_empty_table_is_refused_by_both(cores, monkeypatch):
    ids = np.zeros(100_000, np.int8)
    for native in (True, False):
        monkeypatch.setattr(passes, "use_native", native)
        with pytest.raises(passes.OutsideTable):
            passes.remap(ids, np.zeros(0, np.int16), np.empty(len(ids), np.int16))
        assert passes.remap(ids[:0], np.zeros(0, np.int16), np.empty(0, np.int16)) is None


def test_columns_of_other_types_get_numpys_answers(monkeypatch):
    # The compiled passes read signed integers and float64: an unsigned column, or float32
    # times, take numpy's way instead of a TypeError.
    rng = np.random.default_rng(11)
    unsigned = rng.integers(0, 250, 200_000).astype(np.uint8)
    assert passes.bounds(unsigned) == (int(unsigned.min()), int(unsigned.max()))
    _same(passes.code_counts(unsigned), np.bincount(unsigned))
    _same(passes.positions(unsigned, (3, 200)), np.flatnonzero((unsigned == 3) | (unsigned == 200)))
    times = _times(200_001, 11).astype(np.float32)
    low, high = passes.time_span(times)
    assert (low, high) == (float(np.fmin.reduce(times)), float(np.fmax.reduce(times)))
    passes.finite_times(times)
    assert not np.isinf(times).any()
