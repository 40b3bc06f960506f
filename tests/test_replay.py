"""Time travel: the replayed allocator state agrees with the snapshot and the trace."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.analysis.live import reserved_curve
from memtui.model import open_snapshot
from memtui.replay import Replayer, _add_range, _remove_range
from tests.conftest import sample_files, shared_params


def every_real_file():
    return shared_params("*.pickle") + [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]


@pytest.mark.parametrize("path", every_real_file())
def test_state_after_last_event_is_the_snapshot(path):
    snap = open_snapshot(path)
    for dev in snap.devices:
        state = Replayer(dev).state_at(len(dev.trace) - 1)
        assert (state.allocated, state.active, state.reserved) == (dev.allocated, dev.active, dev.reserved)
        assert len(state.seg_addr) == len(dev.segments)


@pytest.mark.parametrize("path", every_real_file())
def test_reserved_follows_the_segment_events(path):
    # Replayed segments (lives and expandable ranges) against a plain running sum of
    # segment_alloc/map minus segment_free/unmap sizes.
    dev = open_snapshot(path).devices[0]
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
