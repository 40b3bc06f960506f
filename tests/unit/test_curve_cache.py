"""The explorer's curves kept beside the model cache: read back equal, never read wrong."""

from __future__ import annotations

import os
import shutil

import numpy as np

from memtui.analysis.curve_extremes import CurveExtremes, block_count
from memtui.analysis.live import allocated_curve, reserved_curve
from memtui.cache.curves import curves_path, load_curves
from memtui.cache.store import ModelCache
from memtui.open import open_snapshot
from memtui.tui.views.first_view import keep_curves, prepare_view

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "sample_snapshots")


def _copy(tmp_path, name="train_linear_adam.pickle.xz") -> str:
    path = str(tmp_path / name)
    shutil.copy(os.path.join(SAMPLES, name), path)
    return path


def test_curves_kept_after_a_first_open_are_read_back_equal_on_the_next(tmp_path):
    source = _copy(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"), warn=lambda m: None)
    snapshot = open_snapshot(source, cache=cache)
    first = prepare_view(snapshot, None, cache, source)
    assert not isinstance(first.allocated, np.memmap)  # nothing kept yet: computed
    keep_curves(cache, source, first)
    cache.wait()
    again = prepare_view(open_snapshot(source, cache=cache), None, cache, source)
    assert isinstance(again.allocated.base, np.memmap) or isinstance(again.allocated, np.memmap)
    device = again.device
    assert np.array_equal(again.allocated, allocated_curve(device))
    assert np.array_equal(again.reserved, reserved_curve(device))
    # The blocks' extremes are read with them, not made again, and are the ones made from them.
    assert again.kept_extremes is not None and again.allocated_extremes is again.kept_extremes[0]
    for kept, curve in ((again.allocated_extremes, again.allocated), (again.reserved_extremes, again.reserved)):
        made = CurveExtremes.of(np.asarray(curve))
        assert np.array_equal(kept.lows, made.lows) and np.array_equal(kept.highs, made.highs)
    assert again.peak_allocated == first.peak_allocated and again.peak_reserved == first.peak_reserved


def test_a_curves_file_that_does_not_fit_the_model_is_removed_not_read(tmp_path):
    source = _copy(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"), warn=lambda m: None)
    snapshot = open_snapshot(source, cache=cache)
    cache.wait()
    device = snapshot.devices[0]
    path = curves_path(cache, source, device.device)
    for wrong in (np.zeros((2, len(device.trace)), np.int64),  # the curves without their extremes
                  np.zeros(2 * len(device.trace) + 4 * block_count(len(device.trace)) + 1, np.int64)):
        np.save(path, wrong)
        assert load_curves(cache, source, device.device, len(device.trace)) is None
        assert not os.path.exists(path)
    for bad in (b"\x93NUMPY garbage", b""):  # cut short; empty
        with open(path, "wb") as fh:
            fh.write(bad)
        assert load_curves(cache, source, device.device, len(device.trace)) is None
        assert not os.path.exists(path)  # removed, so that the right curves are written next


def test_curves_go_when_their_model_entry_is_pruned(tmp_path):
    source = _copy(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"), warn=lambda m: None)
    snapshot = open_snapshot(source, cache=cache)
    view = prepare_view(snapshot, None, cache, source)
    keep_curves(cache, source, view)
    cache.wait()
    kept = curves_path(cache, source, view.device.device)
    assert os.path.exists(kept)
    os.remove(cache.path_for(source))  # as pruning does to the least recently used entry
    other = _copy(tmp_path, "oom_training.pickle.xz")
    open_snapshot(other, cache=cache)  # a write prunes
    cache.wait()
    assert not os.path.exists(kept)
