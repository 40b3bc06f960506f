"""The explorer's time-travel index kept beside the model cache: read back, it answers as the
index built on the spot does; a file that does not fit is removed and the index built."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time

import numpy as np
import pytest

from memtui.cache.index_store import index_path, load_index
from memtui.cache.store import ModelCache
from memtui.open import open_snapshot
from memtui.replay import IntervalIndex, Replayer
from memtui.tui.views.first_view import prepare_view
from tests.conftest import sample_files

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "sample_snapshots")


def _copy(tmp_path, name="train_linear_adam.pickle.xz") -> str:
    path = str(tmp_path / name)
    shutil.copy(os.path.join(SAMPLES, name), path)
    return path


@pytest.mark.parametrize("path", sample_files()[:10], ids=lambda p: p.name)
def test_an_index_from_its_kept_arrays_answers_as_the_built_one(path):
    snapshot = open_snapshot(path, cache=None)
    for dev in snapshot.devices:
        built = Replayer(dev)
        again = Replayer(dev, indexed=False)
        again.adopt_indexes(*built.kept_indexes())
        assert again.indexed
        points = random.Random(path.name).sample(range(-1, len(dev.trace)), min(60, len(dev.trace) + 1))
        for i in points:
            for name in ("blocks", "segments"):
                assert np.array_equal(np.sort(getattr(again, name).open_at(i)),
                                      np.sort(getattr(built, name).open_at(i))), (name, i)


def test_arrays_of_other_intervals_are_refused():
    start, end = np.array([0, 2, 5]), np.array([4, 9, 6])
    kept = IntervalIndex(start, end, 10, stride=2).kept_arrays()
    with pytest.raises(ValueError):
        IntervalIndex.from_kept(start[:2], end[:2], 10, 2, kept)  # fewer intervals
    with pytest.raises(ValueError):
        IntervalIndex.from_kept(np.array([0, 5, 2]), end, 10, 2, kept)  # another order
    bad = dict(kept, checkpoint_ids=kept["checkpoint_ids"] + 7)
    with pytest.raises(ValueError):
        IntervalIndex.from_kept(start, end, 10, 2, bad)


def test_the_index_kept_after_a_first_open_is_read_on_the_next(tmp_path, monkeypatch):
    source = _copy(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"), warn=lambda m: None)
    first = prepare_view(open_snapshot(source, cache=cache), None, cache, source)
    first.index_replayer()  # built, then kept
    cache.wait()
    path = index_path(cache, source, first.device.device)
    assert os.path.exists(path)

    second = prepare_view(open_snapshot(source, cache=cache), None, cache, source)
    assert not second.replayer.indexed

    def not_built(self):
        raise AssertionError("the kept index was built again")

    monkeypatch.setattr(Replayer, "build_indexes", not_built)
    second.index_replayer()
    assert second.replayer.indexed
    for i in range(-1, second.n_events, max(1, second.n_events // 50)):
        a, b = first.replayer.state_at(i), second.replayer.state_at(i)
        assert np.array_equal(a.blk_addr, b.blk_addr) and np.array_equal(a.seg_addr, b.seg_addr), i


def test_a_damaged_kept_index_is_removed_and_the_index_built(tmp_path):
    source = _copy(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"), warn=lambda m: None)
    first = prepare_view(open_snapshot(source, cache=cache), None, cache, source)
    first.index_replayer()
    cache.wait()
    path = index_path(cache, source, first.device.device)
    data = bytearray(open(path, "rb").read())
    data[-100] ^= 0xFF
    open(path, "wb").write(bytes(data))
    replayer = Replayer(first.device, indexed=False)
    assert not load_index(cache, source, first.device.device, replayer)
    assert not os.path.exists(path) and not replayer.indexed


def test_two_threads_asking_for_the_index_make_it_once(tmp_path, monkeypatch):
    source = _copy(tmp_path)
    view = prepare_view(open_snapshot(source, cache=None), None, None, None)
    built = []
    entered = threading.Event()
    build = Replayer.build_indexes

    def slow_build(self):
        built.append(threading.current_thread().name)
        entered.set()
        time.sleep(0.2)  # the other thread asks meanwhile
        build(self)

    monkeypatch.setattr(Replayer, "build_indexes", slow_build)
    first = threading.Thread(target=view.index_replayer, name="first")
    first.start()
    assert entered.wait(10)
    view.index_replayer()  # waits for the first, then finds the index made
    first.join()
    assert built == ["first"] and view.replayer.indexed
