"""The compiled memory curves (src/memtui_native/curves.c) are numpy's, value for value: on
every real file, from the lives and from the spans, and on generated lives against a sum
written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import memtui.analysis.live as live
from memtui.analysis.live import LifeBounds, allocated_curve, life_spans, reserved_curve
from memtui.model import actions as act
from tests.conftest import heldout_files, sample_files, shared_params
from tests.fixtures.opened import cached

pytestmark = pytest.mark.skipif(live._native is None, reason="built without a C compiler")


def every_real_file():
    return (shared_params("*.pickle*") + [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]
            + [pytest.param(p, id=f"heldout-{p.parent.name}-{p.name}") for p in heldout_files()[:8]])


def _both(monkeypatch, compute):
    """``compute()`` by the compiled curves and by numpy."""
    monkeypatch.setattr(live, "use_native", True)
    compiled = compute()
    monkeypatch.setattr(live, "use_native", False)
    return compiled, compute()


@pytest.mark.parametrize("path", every_real_file())
def test_the_compiled_curves_are_numpys_on_every_real_file(path, monkeypatch):
    snap = cached(str(path))
    for dev in snap.devices:
        spans = life_spans(dev)
        for curve, args in ((allocated_curve, (dev,)), (allocated_curve, (dev, spans)), (reserved_curve, (dev,))):
            compiled, plain = _both(monkeypatch, lambda: curve(*args))  # noqa: B023 - called at once
            assert compiled.dtype == plain.dtype == np.int64
            assert np.array_equal(compiled, plain)
            assert compiled.flags.writeable  # a caller may add to it in place, as to numpy's


def _held_by_hand(start, stop, size, n):
    """Bytes held after each event: every life, one at a time."""
    curve = [0] * n
    for s, e, b in zip(start.tolist(), stop.tolist(), size.tolist()):
        for i in range(n):
            if (s < 0 or s <= i) and not (0 <= e <= i):
                curve[i] += b
    return np.array(curve, np.int64)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("width", [np.int32, np.int64])
def test_generated_lives_are_summed_as_by_hand(seed, width, monkeypatch):
    # Lives begun before the first event (-1), ending at any event or never (n), of any size;
    # columns of either width the model keeps them in.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    lives = int(rng.integers(0, 40))
    start = rng.integers(-1, n, lives).astype(width)
    stop = np.minimum(start.astype(np.int64) + rng.integers(1, n + 2, lives), n).astype(width)
    size = rng.integers(0, 1 << 40, lives).astype(np.int64)
    bounds = LifeBounds(start=start, stop=stop, size=size, n_events=n)
    dev = cached(str(sample_files()[0])).devices[0]  # only asked whether its trace is partial
    compiled, plain = _both(monkeypatch, lambda: allocated_curve(dev, bounds))
    expected = _held_by_hand(start, stop, size, n)
    assert np.array_equal(compiled, expected)
    assert np.array_equal(plain, expected)


@pytest.fixture
def small_parts(monkeypatch):
    """Five cores, and the curves' columns cut into parts of 3 rows (a million otherwise), so
    that the scatter's slices, the parts' sums and their running values all meet."""
    monkeypatch.setattr(live, "usable_cores", lambda: 5)
    old = live._native._part_rows(3)
    yield
    live._native._part_rows(old)


@pytest.mark.parametrize("seed", range(12))
def test_generated_lives_are_summed_as_by_hand_in_parts(seed, small_parts, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 80))
    lives = int(rng.integers(0, 60))
    start = rng.integers(-1, n, lives).astype(np.int32)
    stop = np.minimum(start.astype(np.int64) + rng.integers(1, n + 2, lives), n).astype(np.int32)
    size = rng.integers(0, 1 << 40, lives).astype(np.int64)
    bounds = LifeBounds(start=start, stop=stop, size=size, n_events=n)
    dev = cached(str(sample_files()[0])).devices[0]  # only asked whether its trace is partial
    compiled, plain = _both(monkeypatch, lambda: allocated_curve(dev, bounds))
    assert np.array_equal(compiled, _held_by_hand(start, stop, size, n))
    assert np.array_equal(compiled, plain)
    base = np.frombuffer(live._native.allocated_curve(start, stop, stop, size, n, 12345, 5), np.int64)
    assert np.array_equal(base - 12345, compiled)


@pytest.mark.parametrize("path", every_real_file()[:12])
def test_the_curves_in_parts_are_numpys_on_real_files(path, small_parts, monkeypatch):
    snap = cached(str(path))
    for dev in snap.devices:
        for curve, args in ((allocated_curve, (dev,)), (reserved_curve, (dev,))):
            compiled, plain = _both(monkeypatch, lambda: curve(*args))  # noqa: B023 - called at once
            assert compiled.dtype == plain.dtype == np.int64
            assert np.array_equal(compiled, plain)
            assert compiled.flags.writeable


def test_a_stop_is_the_free_requested_else_the_free_completed():
    # Three lives: freed with a request first, freed without one, never freed.
    start = np.array([0, 1, 2], np.int32)
    request = np.array([3, -1, -1], np.int32)
    end = np.array([5, 4, -1], np.int32)
    size = np.array([100, 10, 1], np.int64)
    curve = np.frombuffer(live._native.allocated_curve(start, request, end, size, 6), np.int64)
    assert curve.tolist() == [100, 110, 111, 11, 1, 1]


def test_the_reserved_sum_counts_segment_events_only():
    action = np.array([act.SEGMENT_ALLOC, act.ALLOC, act.SEGMENT_MAP, act.SEGMENT_UNMAP, 200, act.SEGMENT_FREE],
                      np.int16)
    size = np.array([1000, 7, 300, 100, 5, 1000], np.int64)
    signs = np.zeros(max(act.SEGMENT_ACTIONS) + 1, np.int8)
    signs[list(act.SEGMENT_START)] = 1
    signs[list(act.SEGMENT_END)] = -1
    curve = np.frombuffer(live._native.reserved_curve(action, size, signs.tobytes()), np.int64)
    assert curve.tolist() == [1000, 1000, 1300, 1200, 1200, 200]  # a code past the signs (200) counts 0


def test_columns_of_other_lengths_are_refused():
    one, two = np.zeros(1, np.int64), np.zeros(2, np.int64)
    with pytest.raises(TypeError):
        live._native.allocated_curve(one, one, one, two, 3)
    with pytest.raises(TypeError):
        live._native.reserved_curve(one, two, b"\x01")
    with pytest.raises(TypeError):
        live._native.allocated_curve(np.zeros(1, np.float64), one, one, one, 3)
