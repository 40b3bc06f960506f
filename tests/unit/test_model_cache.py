"""The model cache: hits, misses, corruption, an unwritable folder, and exact round trips."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from memtui import cli
from memtui.cache import layout
from memtui.cache.fileformat import FORMAT_VERSION
from memtui.cache.store import ModelCache
from memtui.model import trace_figures
from memtui.model.actions import OOM
from memtui.model.snapshot import DeviceModel
from memtui.open import open_plain, open_snapshot
from memtui.services.info import summarize
from tests.conftest import sample_files, shared_params
from tests.fixtures.model_equality import assert_same_model

SAMPLE = sample_files()[0]


@pytest.fixture
def snap(tmp_path) -> Path:
    """A private copy of a sample, so the test may change it."""
    folder = tmp_path / "snapshots"
    folder.mkdir()
    path = folder / SAMPLE.name
    shutil.copyfile(SAMPLE, path)
    return path


def cache_files(cache: ModelCache) -> list[str]:
    return sorted(os.listdir(cache.folder)) if os.path.isdir(cache.folder) else []


def warm(path, cache: ModelCache):
    open_snapshot(path, cache=cache)
    cache.wait()


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """A cache holding a sample's model and the model it was written from, made once per
    sample in this module: the checks of every sample below only read them."""
    made: dict = {}

    def warmed_cache(path):
        if path not in made:
            cache = ModelCache(str(tmp_path_factory.mktemp("warmed")))
            fresh = open_snapshot(path, cache=cache)
            cache.wait()
            made[path] = cache, fresh
        return made[path]

    return warmed_cache


def test_hit_returns_the_same_model(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    fresh = open_snapshot(snap, cache=cache)
    cache.wait()
    assert len(cache_files(cache)) == 1
    cached = cache.load(snap)
    assert cached is not None
    assert_same_model(cached, fresh)
    assert cached.source_path == os.fspath(snap)


def test_reading_never_writes_next_to_the_snapshot(snap, tmp_path):
    before = sorted(os.listdir(snap.parent))
    cache = ModelCache(str(tmp_path / "cache"))
    warm(snap, cache)
    open_snapshot(snap, cache=cache)
    assert sorted(os.listdir(snap.parent)) == before


def test_miss_after_the_file_changes(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    warm(snap, cache)
    assert cache.load(snap) is not None
    other = sample_files()[1]
    shutil.copyfile(other, snap)  # new content, size and mtime
    assert cache.load(snap) is None
    rebuilt = open_snapshot(snap, cache=cache)
    assert_same_model(rebuilt, open_plain(other))


def test_miss_when_only_the_mtime_changes(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    warm(snap, cache)
    st = snap.stat()
    os.utime(snap, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert cache.load(snap) is None


@pytest.mark.parametrize("damage", ["truncate", "flip_array_byte", "flip_meta_byte", "garbage", "empty"])
def test_corrupt_cache_is_rebuilt(snap, tmp_path, damage):
    cache = ModelCache(str(tmp_path / "cache"))
    fresh = open_snapshot(snap, cache=cache)
    cache.wait()
    entry = cache.path_for(snap)
    data = bytearray(Path(entry).read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "flip_array_byte":
        data[-5000] ^= 0xFF  # inside the last arrays
    elif damage == "flip_meta_byte":
        data[40] ^= 0x01
    elif damage == "garbage":
        data = bytearray(random.Random(7).randbytes(len(data)))  # the same garbage every run
    else:
        data = bytearray()
    Path(entry).write_bytes(bytes(data))
    assert cache.load(snap) is None  # never trusted
    again = open_snapshot(snap, cache=cache)
    cache.wait()
    assert_same_model(again, fresh)
    assert cache.load(snap) is not None  # and written again, whole


def test_unwritable_cache_folder_falls_back_with_one_warning(snap, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    warnings: list[str] = []
    cache = ModelCache(str(blocker / "cache"), warn=warnings.append)
    first = open_snapshot(snap, cache=cache)
    second = open_snapshot(snap, cache=cache)
    cache.wait()
    assert_same_model(first, second)
    assert len(warnings) == 1 and "\n" not in warnings[0] and "cache" in warnings[0]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_cache_folder_falls_back(snap, tmp_path):
    folder = tmp_path / "ro"
    (folder / f"v{FORMAT_VERSION}").mkdir(parents=True)
    os.chmod(folder / f"v{FORMAT_VERSION}", 0o555)
    warnings: list[str] = []
    cache = ModelCache(str(folder), warn=warnings.append)
    open_snapshot(snap, cache=cache)
    cache.wait()
    assert len(warnings) == 1


def test_two_writers_leave_one_good_file(snap, tmp_path):
    a, b = ModelCache(str(tmp_path / "cache")), ModelCache(str(tmp_path / "cache"))
    model = open_snapshot(snap, cache=None)
    a.store(snap, model, background=True)
    b.store(snap, model, background=True)
    a.wait()
    b.wait()
    assert [n for n in cache_files(a) if not n.startswith(".tmp-")] == [os.path.basename(a.path_for(snap))]
    assert_same_model(a.load(snap), model)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files()])
def test_round_trip_of_every_sample(path, warmed):
    cache, fresh = warmed(path)
    assert_same_model(cache.load(path), fresh)


@pytest.mark.shared
@pytest.mark.parametrize("path", shared_params("*.pickle"))
def test_round_trip_of_shared_snapshots(path, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    fresh = open_snapshot(path, cache=cache)
    cache.wait()
    cached = cache.load(path)
    assert_same_model(cached, fresh)
    # Derived figures the views use come out the same from mapped columns.
    for got, want in zip(cached.devices, fresh.devices):
        assert (got.reserved, got.allocated, got.active) == (want.reserved, want.allocated, want.active)


def test_cached_columns_are_writable_copies(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    warm(snap, cache)
    cached = cache.load(snap)
    column = cached.devices[0].trace.size
    column[:1] = 12345  # private pages: the change stays in this process
    assert cache.load(snap).devices[0].trace.size[0] != 12345 or len(column) == 0


def test_command_line_options(snap, tmp_path, capsys):
    folder = tmp_path / "cli-cache"
    assert cli.main(["info", str(snap), "--cache-dir", str(folder)]) == 0
    assert len(os.listdir(folder / f"v{FORMAT_VERSION}")) == 1
    assert cli.main(["--cache-dir", str(folder), "info", str(snap)]) == 0  # a hit, before the command too
    other = tmp_path / "other-cache"
    assert cli.main(["info", "--no-cache", "--cache-dir", str(other), str(snap)]) == 0
    assert not other.exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    capsys.readouterr()
    assert cli.main(["info", str(snap), "--cache-dir", str(blocker / "c")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cache off" in err


def test_held_writes_start_when_released(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    cache.hold_writes()
    open_snapshot(snap, cache=cache)
    assert cache_files(cache) == []  # held: nothing written, nothing begun
    cache.release_writes()
    cache.wait()
    assert [name.endswith(".mtc") for name in cache_files(cache)] == [True]


def test_abandoned_held_writes_never_start(snap, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    with cache.writes_held():
        open_snapshot(snap, cache=cache)
        cache.abandon()
    cache.wait()
    assert cache_files(cache) == []


def test_a_cache_file_whose_metadata_lies_is_refused_at_once(tmp_path):
    # A 9-byte memo bomb as the metadata of a cache file with a right header and checksum:
    # unpickled as it was, it made the reader allocate 4.2 GB.
    import struct
    import time
    import zlib

    from memtui.cache.file_check import HEADER, MAGIC
    from memtui.cache.fileformat import CorruptCache, read_cache_file

    meta = b"\x80\x04Nr" + struct.pack("<I", 1 << 28) + b"."
    path = tmp_path / "entry.cache"
    path.write_bytes(HEADER.pack(MAGIC, FORMAT_VERSION, len(meta), zlib.crc32(meta), HEADER.size + len(meta)) + meta)
    start = time.monotonic()
    with pytest.raises(CorruptCache, match="metadata unreadable"):
        read_cache_file(str(path))
    assert time.monotonic() - start < 2


def test_constant_arrays_are_stored_as_their_value_and_read_back_whole(tmp_path):
    from memtui.cache import fileformat

    late = np.full(200_000, 7, np.int16)
    late[-1] = 8  # the same value until its very end
    arrays = {"same": np.full(200_000, -1, np.int8), "varied": np.arange(200_000, dtype=np.int64),
              "small_same": np.zeros(10, np.int32), "times": np.full(200_000, 1.5), "late": late,
              "zeros": np.zeros(200_000, np.int64)}
    path = str(tmp_path / "entry.mtc")
    fileformat.write_cache_file(path, dict(arrays), {})
    assert os.path.getsize(path) < 200_000 * 8 + 200_000 * 8 + 200_000 * 2 + (64 << 10)  # "same" took no bytes
    read, meta = fileformat.read_cache_file(path)
    assert [e["name"] for e in meta["arrays"] if "fill" in e] == ["same", "zeros"]
    for name, array in arrays.items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array)
    for name in ("same", "zeros"):  # writable, as every cached column (zeros: untouched pages until written)
        read[name][0] = 3
        assert read[name][0] == 3


def test_a_damaged_piece_in_the_middle_of_a_long_array_is_found(tmp_path, monkeypatch):
    from memtui.cache import file_check, fileformat

    monkeypatch.setattr(file_check, "CHECK_PIECE", 1 << 16)
    path = tmp_path / "entry.mtc"
    fileformat.write_cache_file(str(path), {"long": np.arange(100_000, dtype=np.int64)}, {})
    data = bytearray(path.read_bytes())
    data[-300_000] ^= 1  # several pieces from either end
    path.write_bytes(bytes(data))
    with pytest.raises(fileformat.CorruptCache, match="long checksum"):
        fileformat.read_cache_file(str(path))


def test_a_stored_value_standing_for_more_than_the_file_can_is_refused(tmp_path):
    import pickle
    import zlib

    from memtui.cache import file_check, fileformat

    meta = pickle.dumps({"arrays": [{"name": "huge", "dtype": "|i1", "shape": (1 << 40,), "fill": 0}],
                         "data_length": 0}, protocol=4)
    start = file_check.aligned(file_check.HEADER.size + len(meta))
    path = tmp_path / "entry.mtc"
    path.write_bytes(file_check.HEADER.pack(file_check.MAGIC, FORMAT_VERSION, len(meta), zlib.crc32(meta),
                                            start) + meta + bytes(start - file_check.HEADER.size - len(meta)))
    with pytest.raises(fileformat.CorruptCache, match="huge does not fit"):
        fileformat.read_cache_file(str(path))


def _varied_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"ints": rng.integers(-5, 1 << 40, 300_001), "bytes": rng.integers(-9, 9, 70_003).astype(np.int8),
            "times": rng.random(123_457), "empty": np.zeros(0, np.int32), "same": np.full(100_000, 3, np.int16)}


@pytest.mark.parametrize("piece", [256, 4096, 1 << 20], ids=["piece-256", "piece-4k", "piece-1m"])
def test_the_mapped_write_and_the_plain_one_give_the_same_file(tmp_path, monkeypatch, piece):
    """Pieces copied through maps on many threads, or written in turn where the file system
    reserves no blocks: the same bytes, read back whole."""
    import errno

    from memtui.cache import fileformat

    monkeypatch.setattr(fileformat, "_PIECE", piece)
    mapped, plain = str(tmp_path / "mapped.mtc"), str(tmp_path / "plain.mtc")
    fileformat.write_cache_file(mapped, _varied_arrays(), {"k": 1})

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(fileformat.os, "posix_fallocate", unsupported)
    fileformat.write_cache_file(plain, _varied_arrays(), {"k": 1})
    assert open(mapped, "rb").read() == open(plain, "rb").read()
    read, meta = fileformat.read_cache_file(mapped)
    for name, array in _varied_arrays().items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array), name
    assert meta["k"] == 1
    assert sorted(os.listdir(tmp_path)) == ["mapped.mtc", "plain.mtc"]


def test_a_full_disk_fails_the_write_before_any_piece_is_mapped(tmp_path, monkeypatch):
    """Blocks are reserved before the pieces are copied through maps: a full disk is an
    OSError (the cache is not written), not a signal ending the process at a page."""
    import errno

    from memtui.cache import fileformat

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    stored: list = []
    monkeypatch.setattr(fileformat.os, "posix_fallocate", full)
    monkeypatch.setattr(fileformat, "_store_piece", lambda *args, **kwargs: stored.append(args))
    with pytest.raises(OSError, match="No space"):
        fileformat.write_cache_file(str(tmp_path / "entry.mtc"), _varied_arrays(), {})
    assert stored == [] and os.listdir(tmp_path) == []


def test_a_write_asked_to_stop_between_pieces_leaves_nothing(tmp_path, monkeypatch):
    from memtui.cache import fileformat

    monkeypatch.setattr(fileformat, "_PIECE", 4096)
    asked = iter(range(1_000_000))
    with pytest.raises(fileformat.WriteStopped):
        fileformat.write_cache_file(str(tmp_path / "entry.mtc"), _varied_arrays(), {}, stop=lambda: next(asked) > 20)
    assert os.listdir(tmp_path) == []


def _figures_from_columns(dev) -> dict:
    """The trace's figures worked out again from the columns, plainly."""
    trace = dev.trace
    times = trace.time_us[np.isfinite(trace.time_us)]
    live = (np.count_nonzero(dev.block_version != -1) if dev.partial_trace
            else np.count_nonzero((dev.lives.start != -1) & (dev.lives.end == -1)))
    return {"_action_counts": np.bincount(trace.action.astype(np.int64)),
            "_oom_indices": np.flatnonzero(trace.action == OOM).astype(np.int64),
            "time_span": (float(times.min()), float(times.max())) if len(times) else None,
            "_stacked_actions": sorted({int(a) for a in trace.action[trace.stack >= 0]}),
            "forward_frames": int(np.count_nonzero(trace.fwd >= 0)), "live_at_end": int(live)}


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files()])
def test_a_warm_open_keeps_the_figures_the_columns_give_and_passes_over_no_column(path, warmed, monkeypatch):
    cache, _ = warmed(path)

    def no_pass(*args):
        raise AssertionError("a warm open passed over a column for a figure the cache holds")

    for name in ("action_counts", "oom_indices", "time_span", "stacked_actions", "forward_frames", "never_freed"):
        monkeypatch.setattr(trace_figures, name, no_pass)
    cached = cache.load(path)
    summarize(cached)
    monkeypatch.undo()
    for dev in cached.devices:
        got, want = dev.computed_figures(), _figures_from_columns(dev)
        assert np.array_equal(got.pop("_action_counts"), want.pop("_action_counts"))
        assert np.array_equal(got.pop("_oom_indices"), want.pop("_oom_indices"))
        assert got == want
        assert not dev.oom_indices().flags.writeable


OOM_SAMPLE = next(p for p in sample_files() if p.name.startswith("oom_training"))
LIES = ["counts", "counts_past_int64", "counts_that_wrap_to_the_events", "oom_index_past_the_end",
        "oom_index_not_an_oom", "oom_indices_repeated", "time_span_reversed", "time_span_past_float", "time_span_text",
        "stacked_action_not_in_the_trace", "stacked_actions_unsorted", "stacked_action_text",
        "forward_frames", "live_at_end"]


@pytest.mark.parametrize("lie", LIES)
def test_a_cache_whose_figures_are_not_the_traces_is_rebuilt(tmp_path, monkeypatch, lie):
    snap = tmp_path / OOM_SAMPLE.name
    shutil.copyfile(OOM_SAMPLE, snap)
    honest = DeviceModel.computed_figures

    def lying(dev):
        figures = honest(dev)
        n = len(dev.trace)
        counts = figures["_action_counts"]
        ooms = figures["_oom_indices"]
        if dev.device != 0:
            return figures
        assert len(ooms), "the sample has an OOM"
        not_oom = int(np.flatnonzero(dev.trace.action != OOM)[0])
        if lie == "counts":
            figures["_action_counts"] = counts + 1
        elif lie == "counts_past_int64":
            figures["_action_counts"] = np.append(counts, 0).astype(object)
            figures["_action_counts"][-1] = 2**70
        elif lie == "counts_that_wrap_to_the_events":
            wrapped = [int(c) for c in counts] + [2**63 - 1, 2**63 - 1]
            wrapped[0] += 2  # 2 * (2**63 - 1) + 2 is 2**64: the int64 sum comes back to the events
            figures["_action_counts"] = wrapped
        elif lie == "oom_index_past_the_end":
            figures["_oom_indices"] = np.append(ooms[:-1], n).astype(np.int64)
        elif lie == "oom_index_not_an_oom":
            figures["_oom_indices"] = np.sort(np.append(ooms[1:], not_oom)).astype(np.int64)
        elif lie == "oom_indices_repeated":
            counts[OOM] += 1
            counts[int(np.flatnonzero(counts)[0])] -= 1
            figures["_oom_indices"] = np.sort(np.append(ooms, ooms[0])).astype(np.int64)
        elif lie == "time_span_reversed":
            figures["time_span"] = (2.0, 1.0)
        elif lie == "time_span_past_float":
            figures["time_span"] = (10**400, 1)
        elif lie == "time_span_text":
            figures["time_span"] = "12"
        elif lie == "stacked_action_not_in_the_trace":
            figures["_stacked_actions"] = [*figures["_stacked_actions"], len(counts)]
        elif lie == "stacked_actions_unsorted":
            figures["_stacked_actions"] = [int(np.flatnonzero(counts)[-1]), int(np.flatnonzero(counts)[0])]
        elif lie == "stacked_action_text":
            figures["_stacked_actions"] = ["alloc"]
        else:
            figures[lie] = n + len(dev.lives) + len(dev.blocks) + 1
        return figures

    monkeypatch.setattr(DeviceModel, "computed_figures", lying)
    _written_then_refused_and_rebuilt(snap, ModelCache(str(tmp_path / "cache")), monkeypatch)


def _written_then_refused_and_rebuilt(path, cache: ModelCache, monkeypatch) -> None:
    """The entry written with what ``monkeypatch`` changed is refused as it loads, and
    removed, so the next open writes it afresh: the model of the file as it is."""
    warm(path, cache)
    monkeypatch.undo()
    assert len(cache_files(cache)) == 1
    assert cache.load(path) is None
    assert cache_files(cache) == []
    assert_same_model(open_snapshot(path, cache=cache), open_plain(path))


@pytest.mark.parametrize("figure, value", [
    ("_action_counts", "floats"), ("_action_counts", "bools"), ("_action_counts", "array"),
    ("time_span", [1.0, 2.0]), ("time_span", (1, 2)), ("time_span", (1.0, float("nan"))), ("time_span", (1.0,)),
    ("forward_frames", True), ("forward_frames", -1), ("live_at_end", 2.0)])
def test_figures_of_another_type_are_refused(figure, value):
    dev = open_plain(OOM_SAMPLE).devices[0]
    figures = dev.computed_figures()
    oom_indices = figures.pop("_oom_indices").copy()
    counts = [int(c) for c in figures["_action_counts"]]
    figures["_action_counts"] = counts
    assert layout._checked_figures(dev, dict(figures), oom_indices)["forward_frames"] == figures["forward_frames"]
    if figure == "_action_counts":
        value = {"floats": [float(c) for c in counts], "bools": [bool(c) for c in counts],
                 "array": np.asarray(counts)}[value]
    figures[figure] = value
    with pytest.raises(ValueError):
        layout._checked_figures(dev, figures, oom_indices)


def test_a_write_removes_the_folders_of_older_formats_only(snap, tmp_path):
    root = tmp_path / "cache"
    older, newer, linked_to = root / f"v{FORMAT_VERSION - 1}", root / f"v{FORMAT_VERSION + 1}", tmp_path / "elsewhere"
    for folder in (older, newer, linked_to):
        folder.mkdir(parents=True)
        (folder / "entry.mtc").write_bytes(b"x" * 100)
    (root / f"v{FORMAT_VERSION - 2}").symlink_to(linked_to)
    (root / "summaries").mkdir()
    (root / "summaries" / "kept.msgpack").write_bytes(b"x")
    cache = ModelCache(str(root))
    warm(snap, cache)
    assert not older.exists()
    assert (newer / "entry.mtc").exists() and (linked_to / "entry.mtc").exists()
    assert (root / "summaries" / "kept.msgpack").exists()
    assert len(cache_files(cache)) == 1


@pytest.mark.parametrize("row", [lambda a: (a.device, a.stage), lambda a: "text", lambda a: None])
def test_a_cache_whose_annotations_are_not_rows_of_their_fields_is_rebuilt(tmp_path, monkeypatch, row):
    """The annotations are made from their rows when first read: a bad row is refused when the
    entry is loaded, as it was when they were made at once, not when a view first reads it."""
    import pickle

    from tests.fixtures import variants

    snapshot = variants.modern()
    snapshot["external_annotations"] = [{"stage": "START", "name": "step", "device": 0, "time_us": 1001.0}]
    path = tmp_path / "annotated.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    monkeypatch.setattr(layout, "annotation_row", row)
    _written_then_refused_and_rebuilt(path, ModelCache(str(tmp_path / "cache")), monkeypatch)
