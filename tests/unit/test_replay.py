"""Time travel: the replayed allocator state agrees with the snapshot and the trace."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.analysis.live import reserved_curve
from memtui.model.lifetimes import NONE
from memtui.model.segments import PENDING_FREE
from memtui.open import open_snapshot
from memtui.replay import MIN_BLOCK_SIZE, Replayer, _add_range, _remove_range, rounded_block_sizes
from tests.conftest import sample_files, shared_params
from tests.fixtures.opened import cached


def opened(path):
    """The file's model, opened once per test process (tests/fixtures/opened.py): a replayer
    only reads its device. The test that makes the lives' columns read-only opens its own."""
    return cached(str(path))


def every_real_file():
    return shared_params("*.pickle") + [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]


@pytest.mark.parametrize("path", every_real_file())
def test_state_after_last_event_is_the_snapshot(path):
    snap = opened(path)
    for dev in snap.devices:
        state = Replayer(dev).state_at(len(dev.trace) - 1)
        assert (state.allocated, state.active, state.reserved) == (dev.allocated, dev.active, dev.reserved)
        assert len(state.seg_addr) == len(dev.segments)


@pytest.mark.parametrize("path", every_real_file())
def test_reserved_follows_the_segment_events(path):
    # Replayed segments (lives and expandable ranges) against a plain running sum of
    # segment_alloc/map minus segment_free/unmap sizes.
    dev = opened(path).devices[0]
    n = len(dev.trace)
    if n == 0:
        pytest.skip("empty trace")
    curve = reserved_curve(dev)
    replayer = Replayer(dev)
    for i in np.linspace(0, n - 1, 25).astype(int):
        assert replayer.state_at(int(i)).reserved == int(curve[i])


def test_range_arithmetic():
    ranges = _add_range({}, 100, 50)  # [100, 150)
    ranges = _add_range(ranges, 150, 50)  # touching: merges to [100, 200)
    assert ranges == {100: 100}
    ranges = _remove_range(ranges, 120, 30)  # hole [120, 150)
    assert ranges == {100: 20, 150: 50}
    assert _remove_range(ranges, 0, 1000) == {}
    assert _add_range(ranges, 110, 60) == {100: 100}


def _free_by_walking(state):
    """Reference: walk each segment's blocks in address order."""
    free, largest = [], []
    for s in range(len(state.seg_addr)):
        start = cursor = int(state.seg_addr[s])
        best, used = 0, 0
        for b in state.segment_blocks(s):
            a = int(state.blk_addr[b])
            best = max(best, a - cursor)
            cursor = max(cursor, a + int(state.blk_size[b]))
            used += int(state.blk_size[b])
        free.append(int(state.seg_size[s]) - used)
        largest.append(max(best, start + int(state.seg_size[s]) - cursor))
    return free, largest


@pytest.mark.parametrize("path", every_real_file())
def test_free_per_segment_matches_a_walk(path):
    dev = opened(path).devices[0]
    replayer = Replayer(dev)
    for i in np.linspace(0, max(len(dev.trace) - 1, 0), 12).astype(int):
        state = replayer.state_at(int(i))
        free, largest = state.free_per_segment()
        assert (free.tolist(), largest.tolist()) == _free_by_walking(state)


@pytest.mark.parametrize("path", every_real_file())
def test_a_state_before_the_index_is_built_is_the_indexed_one(path):
    # The explorer shows its first screen before the interval indexes exist (the open lives
    # are then found by one pass): every state must be the one the index gives.
    import dataclasses

    for dev in opened(path).devices:
        n = len(dev.trace)
        indexed, unindexed = Replayer(dev), Replayer(dev, indexed=False)
        for i in sorted({-1, 0, n - 1, *np.linspace(0, max(n - 1, 0), 30).astype(int).tolist()}):
            want, got = indexed.state_at(i), unindexed.state_at(i)
            for f in dataclasses.fields(want):
                if f.init:
                    assert np.array_equal(np.asarray(getattr(want, f.name)), np.asarray(getattr(got, f.name))), \
                        (i, f.name)
        assert not unindexed.indexed
        unindexed.build_indexes()
        assert unindexed.indexed and unindexed.state_at(n // 2).allocated == indexed.state_at(n // 2).allocated


@pytest.mark.parametrize("path", every_real_file())
def test_the_explorers_curves_are_the_analysis_ones(path):
    # The explorer's view shares the replayer's block sizes with the curve: the same curve.
    from memtui.analysis.live import allocated_curve
    from memtui.tui.views.device_view import build_device_view

    snap = opened(path)
    for d, dev in enumerate(snap.devices):
        assert np.array_equal(build_device_view(snap, d).allocated, allocated_curve(dev))


@pytest.mark.parametrize("path", every_real_file())
def test_the_nearest_stacked_event_is_the_arrays(path):
    # The inspector looks back from one event; the whole array is the reference.
    from memtui.model.stackless import last_stacked_before, nearest_stacked_before

    for dev in opened(path).devices:
        stack = dev.trace.stack
        whole = last_stacked_before(stack)
        for i in sorted({0, len(stack) - 1, *np.linspace(0, max(len(stack) - 1, 0), 40).astype(int).tolist()}):
            if len(stack):
                assert nearest_stacked_before(stack, i) == int(whole[i]), i


def test_the_nearest_stacked_event_far_back_and_none():
    from memtui.model.lifetimes import NONE
    from memtui.model.stackless import last_stacked_before, nearest_stacked_before

    stack = np.full(100_000, -1, np.int32)
    stack[[3, 70_000]] = 5
    whole = last_stacked_before(stack)
    for i in (0, 3, 4, 69_999, 70_000, 70_001, 99_999):
        assert nearest_stacked_before(stack, i) == int(whole[i])
    assert nearest_stacked_before(stack, 3) == NONE


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files()])
def test_the_state_asked_for_again_is_the_one_kept_and_read_only(path):
    dev = opened(path).devices[0]
    n = len(dev.trace)
    replayer, fresh = Replayer(dev, indexed=False), Replayer(dev)
    for i in (n - 1, n - 1, n // 2, n - 1, -1, -1, n // 2):
        state = replayer.state_at(i)
        if i == n - 1:
            assert replayer.state_at(n + 5) is state  # asked past the end: the last event's
        want = fresh.state_at(i)
        for name in ("seg_addr", "seg_size", "blk_addr", "blk_size", "blk_state", "blk_life", "blk_segment"):
            got = getattr(state, name)
            assert np.array_equal(got, getattr(want, name)), (i, name)
            assert not got.flags.writeable, name
    assert replayer.state_at(n // 3) is not replayer.state_at(n // 4) or n // 3 == n // 4


@pytest.mark.parametrize("path", [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()])
def test_the_replayer_reads_the_lives_columns_and_never_writes_them(path):
    # The replayer works from the model's columns as they are (a cached model's are
    # read-only maps of its file): a state from read-only columns is the state from copies.
    import dataclasses

    for dev in open_snapshot(path).devices:
        n = len(dev.trace)
        points = sorted({-1, 0, n - 1, *np.linspace(0, max(n - 1, 0), 12).astype(int).tolist()})
        want = [Replayer(dev, indexed=False).state_at(i) for i in points]
        for name in ("start", "request", "end", "addr", "size"):
            getattr(dev.lives, name).setflags(write=False)
        for indexed in (False, True):
            replayer = Replayer(dev, indexed=indexed)
            for i, expected in zip(points, want):
                got = replayer.state_at(i)
                for f in dataclasses.fields(expected):
                    if f.init:
                        assert np.array_equal(np.asarray(getattr(expected, f.name)), np.asarray(getattr(got, f.name)))
                # What the columns mean, read from them here: a life shown is open after i (begun
                # at or before it, NONE: before the trace; not ended by it), and pending where
                # its free was requested at or before i.
                if dev.partial_trace:
                    continue
                life = got.blk_life[got.blk_life != NONE]
                start, end, request = dev.lives.start[life], dev.lives.end[life], dev.lives.request[life]
                assert ((start <= i) & ((end == NONE) | (end > i))).all()
                pending = got.blk_state[got.blk_life != NONE] == PENDING_FREE
                assert np.array_equal(pending, (request != NONE) & (request <= i))


def test_block_sizes_round_up_as_the_allocator_does_for_every_value():
    assert MIN_BLOCK_SIZE & (MIN_BLOCK_SIZE - 1) == 0  # a power of two, which the rounding relies on
    edges = [-(1 << 40), -513, -512, -511, -1, 0, 1, 511, 512, 513, 1023, 1024, (1 << 31) - 1, 1 << 31, (1 << 62) - 1]
    rng = np.random.default_rng(11)
    values = edges + [int(v) for v in rng.integers(-(1 << 20), 1 << 50, 2000)]
    expected = [max(0, -(-v // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE) for v in values]
    for dtype in (np.int64, np.int32):
        fitting = [v for v in values if np.iinfo(dtype).min <= v <= np.iinfo(dtype).max]
        got = rounded_block_sizes(np.array(fitting, dtype))
        assert got.dtype == np.int64
        assert got.tolist() == [max(0, -(-v // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE) for v in fitting]
    assert rounded_block_sizes(np.array(values, np.int64)).tolist() == expected
