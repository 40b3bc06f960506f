"""The compiled scanner (memtui/load/fast, src/memtui_native) builds exactly the model the
reference paths build, or hands the file over: the same model or the same error, always.

Skipped, with the reason, where memtui was installed without a C compiler; CI sets
MEMTUI_REQUIRE_NATIVE=1 so a missing build fails there instead.
"""

from __future__ import annotations

import logging
import lzma
import os
import pickle
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtui.load.fast as fast
from memtui.errors import SnapshotError
from memtui.load.fast import FastFallback, scan_snapshot
from memtui.model import actions as act
from memtui.model import lifetimes
from memtui.model.columns import narrow_type
from memtui.open import open_fast, open_plain, open_snapshot, open_streaming
from tests.conftest import SAMPLES, SHARED, sample_files, scenario_files, shared_files, shared_params
from tests.fixtures import variants
from tests.fixtures.model_equality import assert_same_model
from tests.fixtures.scanner_files import torch_like
from tests.fixtures.snapshot_strategies import count_case, fuzz_settings
from tests.fixtures.snapshot_strategies import snapshots as hostile_snapshots

NOT_BUILT = ("memtui._native is not built (memtui was installed without a working C compiler): the fast path "
             "is off and files go to the streaming decoder; reinstall with a compiler to test it")
pytestmark = pytest.mark.skipif(fast._native is None, reason=NOT_BUILT)
FUZZ = fuzz_settings()


def test_ci_builds_the_fast_path():
    """Where MEMTUI_REQUIRE_NATIVE is set (.ci/run), the build must have worked."""
    if os.environ.get("MEMTUI_REQUIRE_NATIVE"):
        assert fast.available(), NOT_BUILT


# -- real files: the fast path is taken, and builds the reference model ----------------------

@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files() + scenario_files()])
def test_samples_fast_like_reference(path):
    got = open_fast(path)
    if got is None:  # a field the scanner does not read (forward_frames, dict user_metadata, ...)
        assert path.parent.name == "format", f"{path.name}: a recording of torch that the fast path should read"
        return
    assert_same_model(got, open_plain(path))


@pytest.mark.shared
@pytest.mark.parametrize("path", shared_params("*.pickle"))
def test_shared_snapshots_fast_like_reference(path):
    got = open_fast(path)
    assert got is not None, "a torch snapshot must not need the fallback"
    assert_same_model(got, open_plain(path))


@pytest.mark.shared
def test_big_trace_fast_like_streaming(big_trace):
    got = open_fast(big_trace)
    assert got is not None
    assert_same_model(got, open_streaming(big_trace))


def test_progress_counts_file_bytes():
    path = sample_files()[0]
    seen = []
    assert open_fast(path, lambda stage, done, total: seen.append((stage, done, total))) is not None
    reading = [(done, total) for stage, done, total in seen if stage == "reading"]
    assert reading and reading[-1] == (path.stat().st_size, path.stat().st_size)
    assert seen[-1] == ("indexing", 1, 1)


def test_a_progress_callback_that_cancels_stops_the_load():
    class Cancelled(Exception):
        pass

    def cancel(stage, done, total):
        raise Cancelled

    with pytest.raises(Cancelled):
        open_fast(sample_files()[0], cancel)


@pytest.fixture
def read_chunk():
    """Sets the compiled reader's read size (uncompressed files) for one test."""
    saved = fast._native._parallel_limits()
    yield lambda size: fast._native._parallel_limits(saved[0], saved[1], saved[2], size)
    fast._native._parallel_limits(*saved)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 4099])
def test_any_chunk_boundary_gives_the_same_model(monkeypatch, tmp_path, read_chunk, chunk):
    """The file is read in pieces; an entry cut by a piece's end is read again whole."""
    path = tmp_path / "snap.pickle"
    data = pickle.dumps(torch_like(entries=300), protocol=4)
    path.write_bytes(data)
    xz = tmp_path / "snap.pickle.xz"
    xz.write_bytes(lzma.compress(data))
    want = open_plain(path)
    monkeypatch.setattr(fast, "CHUNK", chunk)  # compressed files are fed from Python
    read_chunk(chunk)  # uncompressed ones are read by the compiled reader
    assert_same_model(open_fast(path), want)
    assert_same_model(open_fast(xz), open_plain(xz))
    real = SHARED / "train_linear_adam.pickle"
    if real.exists() and chunk >= 7:
        assert_same_model(open_fast(real), open_plain(real))


# -- the parallel pass (src/memtui_native/parallel.c) ----------------------------------------------

def in_order_and_parallel(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("MEMTUI_SCAN_THREADS", "1")
        in_order = open_fast(path)
    return in_order, open_fast(path)


def _workers_read_what_one_reads(paths: list[Path], monkeypatch) -> int:
    """How many ranges the workers' reads of ``paths`` merged; each model checked against the
    read in order and the plain path's."""
    merged = 0
    for path in paths:
        in_order, parallel = in_order_and_parallel(path, monkeypatch)
        assert in_order is not None and parallel is not None, path.name
        assert_same_model(parallel, in_order)
        assert_same_model(parallel, open_plain(path))
        merged += scan_snapshot(path).parallel["merged"]
    return merged


def test_many_workers_read_what_one_reads(tmp_path, monkeypatch, many_workers):
    paths = []
    for seed, entries in enumerate((200, 1200, 3000)):
        path = tmp_path / f"gen{seed}.pickle"
        path.write_bytes(pickle.dumps(torch_like(entries=entries, seed=seed), protocol=4))
        paths.append(path)
    assert _workers_read_what_one_reads(paths, monkeypatch) > 10  # the workers did read most of it


def test_many_workers_read_what_one_reads_of_the_shared_recordings(monkeypatch, many_workers):
    paths = sorted(SHARED.glob("*.pickle"))
    assert _workers_read_what_one_reads(paths, monkeypatch) >= len(paths)


def test_ranges_are_merged_while_a_later_one_still_runs(tmp_path, monkeypatch, many_workers):
    """The recorded samples' ranges chain (a worker reads to the next one's start), so each
    range before the last, 50 ms late, is merged while it runs; the model is the same."""
    limits = fast._native._parallel_limits()
    fast._native._parallel_limits(*limits[:5], 50_000)  # the fixture puts back the limits
    chained = 0
    for sample in [p for p in sample_files() if p.parent.name == "sample_snapshots"]:  # the bundled recordings
        path = tmp_path / sample.name.removesuffix(".xz")
        path.write_bytes(lzma.decompress(sample.read_bytes()) if sample.suffix == ".xz" else sample.read_bytes())
        in_order, parallel = in_order_and_parallel(path, monkeypatch)
        if in_order is None:
            continue  # a file the fast path leaves to the streaming decoder
        assert_same_model(parallel, in_order)
        passes = scan_snapshot(path).parallel
        assert passes["merged_while_workers_ran"] < passes["ranges"], path.name  # the last one never
        if passes["ranges"] >= 2 and passes["read_in_order"] == 0:
            chained += 1
            assert passes["merged_while_workers_ran"] >= 1, (path.name, passes)
    assert chained >= 5


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(entries=st.integers(0, 1500), seed=st.integers(0, 1 << 16), protocol=st.integers(2, 5))
def test_generated_snapshots_read_by_workers_like_plain(tmp_path, monkeypatch, many_workers, entries, seed, protocol):
    """Protocols 2 and 3 number memo slots with PUT, which workers cannot: read in order."""
    path = tmp_path / f"gen{protocol}.pickle"
    path.write_bytes(pickle.dumps(torch_like(entries=entries, seed=seed), protocol=protocol))
    got = open_fast(path)
    assert got is not None
    assert_same_model(got, open_plain(path))


@FUZZ
@given(data=st.data())
def test_byte_mutations_read_by_workers_like_in_order(tmp_path, monkeypatch, many_workers, data):
    count_case("parallel pass byte mutations")
    base = MUTATION_BASES[data.draw(st.integers(0, len(MUTATION_BASES) - 1), label="base")]
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(base) - 1), st.integers(0, 255)), min_size=1,
                               max_size=6), label="edits")
    mutated = bytearray(base)
    for pos, value in edits:
        mutated[pos] = value
    path = tmp_path / "mutated.pickle"
    path.write_bytes(bytes(mutated[:data.draw(st.integers(1, len(base)), label="cut")]))
    in_order, parallel = (outcome_of(path, monkeypatch, threads) for threads in ("1", "7"))
    assert_same_outcome(parallel, in_order)


def outcome_of(path, monkeypatch, threads: str):
    with monkeypatch.context() as m:
        m.setenv("MEMTUI_SCAN_THREADS", threads)
        try:
            return open_fast(path) or ("fallback",)
        except SnapshotError as exc:
            return (type(exc), exc.message)


def test_entry_bytes_inside_a_value_are_no_range_start(tmp_path, monkeypatch, many_workers):
    """A range starts where an entry's first bytes are found; bytes values holding those bytes
    make false starts, which the main thread notices (it does not land on them) and reads
    in order."""
    snap = torch_like(entries=400)
    data = pickle.dumps(snap, protocol=4)
    second = data.index(b"}\x94(", data.index(b"}\x94(", data.index(b"device_traces")) + 1)
    pattern = data[second:second + (5 if data[second + 3] == ord("h") else 8)]  # BINGET or LONG_BINGET of 'action'
    assert pattern in data[second + 1:]
    snap["allocator_settings"]["noise"] = [pattern * 40 + bytes([k]) for k in range(40)]
    snap["device_traces"][0][100]["user_metadata"] = "x" * 3000
    path = tmp_path / "noise.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    in_order, parallel = in_order_and_parallel(path, monkeypatch)
    assert_same_model(parallel, in_order)
    assert_same_model(parallel, open_plain(path))


def test_a_refused_opcode_in_a_worker_range(tmp_path, monkeypatch, many_workers):
    snap = torch_like(entries=1500)
    snap["device_traces"][0][1200]["user_metadata"] = "MARKER-VALUE-XYZ"
    data = pickle.dumps(snap, protocol=4).replace(b"\x8c\x10MARKER-VALUE-XYZ", b"cos\nsystem\n")
    path = tmp_path / "evil.pickle"
    path.write_bytes(data)
    with pytest.raises(FastFallback):
        scan_snapshot(path)
    with pytest.raises(SnapshotError) as fast_error:
        open_snapshot(path, cache=None)
    with pytest.raises(SnapshotError) as plain_error:
        open_snapshot(path, streaming=False, cache=None)
    assert fast_error.value.message == plain_error.value.message


def test_a_progress_callback_that_cancels_stops_the_workers(tmp_path, many_workers):
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(torch_like(entries=3000), protocol=4))

    class Cancelled(Exception):
        pass

    calls = []

    def cancel(stage, done, total):
        calls.append(done)
        if len(calls) > 1:
            raise Cancelled

    with pytest.raises(Cancelled):
        open_fast(path, cancel)
    assert open_fast(path) is not None  # nothing left behind


def test_utf8_check_of_the_workers_matches_python():
    import itertools
    import random

    def python_takes(b: bytes) -> bool:
        try:
            b.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return False
        return True

    samples = [bytes(t) for t in itertools.product(range(256), repeat=2)]
    rng = random.Random(5)
    samples += [bytes(rng.choice([rng.randrange(256), rng.randrange(0x80, 0xC0), rng.randrange(0xC0, 0xF8)])
                      for _ in range(rng.randrange(1, 7))) for _ in range(50_000)]
    assert [fast._native._utf8_valid(b) for b in samples] == [python_takes(b) for b in samples]


def test_a_file_the_scanner_does_not_read_is_logged_and_read_by_the_streaming_decoder(tmp_path, caplog):
    snap = variants.modern()
    snap["device_traces"][0][1]["forward_frames"] = ["  File \"train.py\", line 3, in main\n"]
    path = tmp_path / "forward.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    with caplog.at_level(logging.DEBUG, logger="memtui.load"):
        assert open_fast(path) is None
        got = open_snapshot(path, cache=None)
    assert any("without the fast path" in r.getMessage() and "does not read" in r.getMessage()
               for r in caplog.records)
    assert_same_model(got, open_plain(path))


def test_without_the_compiled_part_every_file_still_opens(monkeypatch):
    """What a machine without a C compiler runs: the streaming decoder and numpy lifetimes."""
    path = sample_files()[0]
    want = open_snapshot(path, cache=None)
    monkeypatch.setattr(fast, "enabled", False)
    monkeypatch.setattr(lifetimes, "use_native", False)
    assert open_fast(path) is None
    assert_same_model(open_snapshot(path, cache=None), want)


# -- generated snapshots: every layout detail the scanner reads ------------------------------

@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_generated_torch_like_snapshots_take_the_fast_path(tmp_path, protocol):
    path = tmp_path / f"gen{protocol}.pickle"
    for seed in range(3):
        path.write_bytes(pickle.dumps(torch_like(entries=2500, seed=seed), protocol=protocol))
        got = open_fast(path)
        assert got is not None
        assert_same_model(got, open_plain(path))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(entries=st.integers(0, 120), seed=st.integers(0, 1 << 16), protocol=st.integers(2, 5),
       dropped=st.sets(st.sampled_from(["segments", "allocator_settings", "external_annotations"])))
def test_generated_snapshots_fast_like_plain(tmp_path, entries, seed, protocol, dropped):
    snap = torch_like(entries=entries, seed=seed)
    for key in dropped:
        snap.pop(key)
    path = tmp_path / f"gen{protocol}.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=protocol))
    got = open_fast(path)
    assert got is not None
    assert_same_model(got, open_plain(path))


# -- hostile and broken files: the same model or the same one-line error as before -------------

def reference_outcome(path, monkeypatch):
    """open_snapshot as it was before the fast path: the streaming decoder, then the plain path."""
    with monkeypatch.context() as m:
        m.setattr(fast, "enabled", False)
        return outcome(path)


def outcome(path):
    try:
        return open_snapshot(path, cache=None)
    except SnapshotError as exc:
        return (type(exc), exc.message)


def assert_same_outcome(got, want) -> None:
    if isinstance(want, tuple) or isinstance(got, tuple):
        assert got == want
    else:
        assert_same_model(got, want)


MUTATION_BASES = [pickle.dumps(variants.modern(), protocol=4), pickle.dumps(torch_like(entries=120), protocol=4)]
if (SHARED / "multistream.pickle").exists():
    MUTATION_BASES.append((SHARED / "multistream.pickle").read_bytes())


@FUZZ
@given(data=st.data())
def test_byte_mutations_fast_like_reference(tmp_path, monkeypatch, data):
    count_case("fast path byte mutations")
    base = MUTATION_BASES[data.draw(st.integers(0, len(MUTATION_BASES) - 1), label="base")]
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(base) - 1), st.integers(0, 255)), min_size=1,
                               max_size=8), label="edits")
    cut = data.draw(st.integers(1, len(base)), label="cut")
    mutated = bytearray(base)
    for pos, value in edits:
        mutated[pos] = value
    path = tmp_path / "mutated.pickle"
    path.write_bytes(bytes(mutated[:cut]))
    assert_same_outcome(outcome(path), reference_outcome(path, monkeypatch))


def dump(snapshot: dict, protocol: int) -> bytes:
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        return pickle.dumps(snapshot, protocol=protocol)
    finally:
        sys.setrecursionlimit(old)


@fuzz_settings(30)  # each case decodes on both paths; a long run takes as many as it asks for
@given(snapshot=hostile_snapshots, protocol=st.integers(2, 5))
def test_hostile_values_fast_like_reference(tmp_path, monkeypatch, snapshot, protocol):
    count_case("fast path hostile values")
    path = tmp_path / "fuzz.pickle"
    path.write_bytes(dump(snapshot, protocol))
    assert_same_outcome(outcome(path), reference_outcome(path, monkeypatch))


REFUSED = {
    "GLOBAL": b"cos\nsystem\n", "STACK_GLOBAL": b"\x8c\x02os\x8c\x06system\x93", "REDUCE": b")R", "BUILD": b"}b",
    "INST": b"(ios\nsystem\n", "OBJ": b"()o", "NEWOBJ": b")\x81", "NEWOBJ_EX": b"))}\x92", "EXT1": b"\x82\x01",
    "EXT2": b"\x83\x01\x00", "EXT4": b"\x84\x01\x00\x00\x00", "PERSID": b"Pid\n", "BINPERSID": b"N" + b"Q",
}


@pytest.mark.parametrize("where", ["before the traces", "inside an entry", "after the traces"])
@pytest.mark.parametrize("name", list(REFUSED))
def test_opcodes_that_run_code_are_refused(tmp_path, name, where):
    """The scanner runs nothing and builds nothing for them: the plain path refuses the file by
    the name of what it asks for, exactly as without the fast path."""
    marker = b"MARKER-VALUE-XYZ"
    snap = torch_like(entries=20)
    if where == "before the traces":
        snap["segments"][0]["segment_type"] = marker.decode()
    elif where == "inside an entry":
        snap["device_traces"][0][10]["user_metadata"] = marker.decode()
    else:
        snap["external_annotations"][0]["name"] = marker.decode()
    data = pickle.dumps(snap, protocol=4)
    needle = b"\x8c" + bytes([len(marker)]) + marker
    assert data.count(needle) == 1
    evil = REFUSED[name]
    if name == "PERSID":
        data = data.replace(needle, evil + b"N0" * 0)
    path = tmp_path / "evil.pickle"
    path.write_bytes(data.replace(needle, evil))
    with pytest.raises(FastFallback):
        scan_snapshot(path)
    with pytest.raises(SnapshotError) as fast_error:
        open_snapshot(path, cache=None)
    with pytest.raises(SnapshotError) as plain_error:
        open_snapshot(path, streaming=False, cache=None)
    assert fast_error.value.message == plain_error.value.message
    assert "\n" not in fast_error.value.message


CLAIMS = {"<Q": 1 << 40, "<I": (1 << 32) - 1, "<i": (1 << 31) - 1}


@pytest.mark.parametrize("opcode,length", [(b"\x8d", "<Q"), (b"\x8e", "<Q"), (b"X", "<I"), (b"\x95", "<Q"),
                                           (b"\x8b", "<i")])
def test_declared_lengths_never_allocate(tmp_path, opcode, length):
    """A claim of gigabytes, at the start or inside an entry: refused at once, as before."""
    for where in ("start", "entry"):
        if where == "start":
            data = b"\x80\x04" + opcode + struct.pack(length, CLAIMS[length]) + b"."
        else:
            snap = torch_like(entries=20)
            snap["device_traces"][0][5]["user_metadata"] = "CLAIM-HERE-ABC"
            data = pickle.dumps(snap, protocol=4)
            claim = opcode + struct.pack(length, CLAIMS[length])
            data = data.replace(b"\x8c\x0eCLAIM-HERE-ABC", claim)
        path = tmp_path / f"claim-{where}.pickle"
        path.write_bytes(data)
        start = time.monotonic()
        with pytest.raises(FastFallback):
            scan_snapshot(path)
        with pytest.raises(SnapshotError) as refused:
            open_snapshot(path, cache=None)
        assert time.monotonic() - start < 5
        with pytest.raises(SnapshotError) as plain:
            open_snapshot(path, streaming=False, cache=None)
        assert refused.value.message == plain.value.message


def test_a_trace_list_referred_to_twice_is_not_read_as_two_traces(tmp_path):
    snap = variants.modern()
    trace = [dict(entry) for entry in snap["device_traces"][0] * 300]  # fresh entries, as torch writes them
    snap["device_traces"] = [trace, trace]
    path = tmp_path / "twice.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    with pytest.raises(FastFallback, match="never to be referred|trace, an entry|among the device traces"):
        scan_snapshot(path)
    assert_same_model(open_snapshot(path, cache=None), open_plain(path))


def test_an_entry_referred_to_outside_its_trace(tmp_path):
    snap = torch_like(entries=30)
    snap["external_annotations"] = [snap["device_traces"][0][4]]
    path = tmp_path / "shared_entry.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    assert open_fast(path) is None
    assert_same_model(open_snapshot(path, cache=None), open_plain(path))


def test_a_frame_list_changed_after_an_entry_used_it(tmp_path):
    """A block's frame list that an entry used, then appended to by the file: the scanner
    interned the list as it was when the entry used it, so it hands the file over."""
    import pickletools

    snap = torch_like(entries=30)
    block_frames = snap["segments"][0]["blocks"][0]["frames"]
    block_frames.insert(0, {"name": "b", "filename": "BLOCKFRAMES.py", "line": 1})
    data = pickle.dumps(snap, protocol=2)
    last_list = index = None
    previous = None
    for op, arg, _ in pickletools.genops(data):
        if previous == "EMPTY_LIST" and op.name in ("BINPUT", "LONG_BINPUT"):
            last_list = arg
        if arg == "BLOCKFRAMES.py" and index is None:
            index = last_list
        previous = op.name
    assert index is not None and data.endswith(b"u.")
    get = b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)
    path = tmp_path / "changed.pickle"
    path.write_bytes(data[:-2] + get + b"}a0" + b"u.")  # GET the list, append {}, POP it
    assert open_fast(path) is None
    assert_same_model(open_snapshot(path, cache=None), open_plain(path))


def key_slot_written_again(tmp_path) -> tuple:
    """A file that writes a key's memo slot again between two traces: the slot that named
    ``stream`` names ``device_free`` from the third trace on (a string pushed, BINPUT into the
    slot, POP). Its entries name the same slot in the same place as the first trace's did."""
    import pickletools

    snap = torch_like(entries=60)
    for trace in snap["device_traces"]:
        for entry in trace:
            entry.pop("device_free", None)
    data = pickle.dumps(snap, protocol=2)
    ops = list(pickletools.genops(data))
    slot = next(ops[k + 1][1] for k, (op, arg, _) in enumerate(ops)
                if arg == "stream" and ops[k + 1][0].name in ("BINPUT", "LONG_BINPUT"))
    empty_lists = [pos for op, _, pos in ops if op.name == "EMPTY_LIST"]
    # the traces' list, then the first trace's: the second trace is the next list after the first's end
    second = next(pos for pos in empty_lists if pos > data.index(b"snapshot"))
    put = b"q" + bytes([slot]) if slot < 256 else b"r" + struct.pack("<I", slot)
    written_again = data[:second] + b"X" + struct.pack("<I", 11) + b"device_free" + put + b"0" + data[second:]
    path = tmp_path / "rewritten_key.pickle"
    path.write_bytes(written_again)
    return path, pickle.loads(written_again)


def test_a_key_slot_written_again_names_the_new_key(tmp_path):
    """The scanner remembers which key an entry's place named by the bytes of its memo
    reference (src/memtui_native/entry.c, read_key); a slot written again ends that. (Protocol
    2 numbers slots with PUT, so the file is read in order; with workers, see
    test_scanner_memo.py.)"""
    path, loaded = key_slot_written_again(tmp_path)
    third = loaded["device_traces"][2]
    assert third and all("device_free" in e and "stream" not in e for e in third)  # the file says so
    got = open_fast(path)
    assert got is not None  # read by the scanner, not handed over
    assert_same_model(got, open_plain(path))
    assert list(got.devices[2].trace.device_free) == [e["device_free"] for e in third]


# -- the compiled pairing of allocations and frees ------------------------------------------------

@pytest.mark.parametrize("path", sample_files()[:12] + shared_files("big_trace*"), ids=lambda p: p.name)
def test_threaded_lifetimes_of_real_traces_equal_the_serial_ones(path):
    if lifetimes._native is None:
        pytest.skip(NOT_BUILT)
    snapshot = open_snapshot(path, cache=None)
    for dev in snapshot.devices:
        trace = dev.trace
        args = (trace.action, trace.addr.astype(np.int64), trace.size, act.BLOCK_START, (act.FREE_REQUESTED,),
                act.BLOCK_END)
        serial = lifetimes._native_lifetimes(*args, 1)
        for threads in (2, 7):
            threaded = lifetimes._native_lifetimes(*args, threads)
            for name in ("addr", "version", "start", "request", "end", "size", "event_version", "event_life"):
                assert np.array_equal(getattr(threaded, name), getattr(serial, name)), (threads, name)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 400), seed=st.integers(0, 1 << 30), addresses=st.integers(1, 12), threads=st.integers(1, 9))
def test_native_lifetimes_equal_numpy(n, seed, addresses, threads):
    if lifetimes._native is None:
        pytest.skip(NOT_BUILT)
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 12, n).astype(np.int16)
    addr = (rng.integers(0, addresses, n) * 512 - rng.integers(0, 2, n) * (1 << 62)).astype(np.int64)
    size = rng.integers(-5, 1 << 40, n).astype(np.int64)
    for codes in ((act.BLOCK_START, (act.FREE_REQUESTED,), act.BLOCK_END), (act.SEGMENT_START, (), act.SEGMENT_END),
                  (act.BLOCK_START, (), act.BLOCK_END)):
        got = lifetimes._narrow(lifetimes._native_lifetimes(action, addr, size, *codes, threads), n)
        want = lifetimes._narrow(lifetimes.numpy_lifetimes(action, addr, size, *codes), n)
        for name in ("addr", "version", "start", "request", "end", "size", "event_version", "event_life"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("lives", [126, 127, 128, 129, 200, 32766, 32767, 32768, 32769, 40000])
@pytest.mark.parametrize("one_address", [True, False], ids=["versions", "lives"])
def test_native_lifetimes_equal_numpy_at_every_width_edge(lives, one_address):
    # One address freed and reused ``lives`` times (versions up to lives - 1), or ``lives``
    # addresses each used once: the per-event columns' widths (1, 2 or 4 bytes) turn at these.
    if lifetimes._native is None:
        pytest.skip(NOT_BUILT)
    alloc, free = act.BLOCK_START[0], act.BLOCK_END[0]
    action = np.tile(np.array([alloc, free], np.int16), lives)
    addr = np.full(2 * lives, 1 << 20, np.int64) if one_address else np.repeat(np.arange(lives) * 512, 2)
    size = np.full(2 * lives, 512, np.int64)
    want = lifetimes._narrow(lifetimes.numpy_lifetimes(action, addr, size, act.BLOCK_START, (), act.BLOCK_END),
                             len(action))
    for threads in (1, 2, 7):
        raw = lifetimes._native_lifetimes(action, addr, size, act.BLOCK_START, (), act.BLOCK_END, threads)
        # the widths the compiled pairing picks itself, before _narrow: narrow_type's
        assert raw.event_version.dtype == narrow_type(-1, int(want.version.max()))
        assert raw.event_life.dtype == narrow_type(-1, len(want) - 1)
        got = lifetimes._narrow(raw, len(action))
        for name in LIFE_COLUMNS:
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (threads, name)


LIFE_COLUMNS = ("addr", "version", "start", "request", "end", "size", "event_version", "event_life")


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 400), seed=st.integers(0, 1 << 30), addresses=st.integers(1, 12),
       share=st.sampled_from([0.02, 0.2, 0.6]))
def test_lives_of_few_events_paired_alone_equal_the_whole_pairing(n, seed, addresses, share):
    rng = np.random.default_rng(seed)
    # Mostly block events, with a ``share`` of segment events among them.
    action = np.where(rng.random(n) < share, rng.choice([act.SEGMENT_ALLOC, act.SEGMENT_FREE], n),
                      rng.integers(0, 12, n)).astype(np.int8)
    addr = (rng.integers(0, addresses, n) * 512).astype(np.int64)
    size = rng.integers(1, 1 << 40, n).astype(np.int64)
    for codes in ((act.SEGMENT_START, (), act.SEGMENT_END), (act.BLOCK_START, (act.FREE_REQUESTED,), act.BLOCK_END)):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(lifetimes, "SPARSE_FROM", 0)
            some = lifetimes.compute_lifetimes(action, addr, size, *codes, few=True)
        whole = lifetimes.compute_lifetimes(action, addr, size, *codes)
        for name in LIFE_COLUMNS:
            a, b = getattr(some, name), getattr(whole, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("path", sample_files()[:12] + shared_files("*.pickle")[:8] + shared_files("big_trace*"),
                         ids=lambda p: p.name)
def test_segment_lives_of_real_traces_paired_alone_equal_the_whole_pairing(path, monkeypatch):
    monkeypatch.setattr(lifetimes, "SPARSE_FROM", 0)
    for dev in open_snapshot(path, cache=None).devices:
        t = dev.trace
        args = (t.action, t.addr, t.size, act.SEGMENT_START, (), act.SEGMENT_END)
        some, whole = lifetimes.compute_lifetimes(*args, few=True), lifetimes.compute_lifetimes(*args)
        for name in LIFE_COLUMNS:
            a, b = getattr(some, name), getattr(whole, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (path.name, name)


def test_the_traces_referred_to_outside_their_list_are_found_however_deep():
    """The walk skips what holds only strings and numbers; a reference to the root, to the
    list of traces or to a trace (the scanner's capsule) is found wherever it is."""
    import datetime

    from memtui.load.fast import _check_detached

    capsule = datetime.datetime_CAPI  # a PyCapsule, as the scanner's trace placeholders
    traces = [capsule]

    def root_with(value) -> dict:
        root = {"segments": [{"address": 1, "frames": [{"name": "f", "line": 3}]}], "device_traces": traces,
                "external_annotations": [{"name": "a", "time_us": 1.5, "device": 0} for _ in range(50)]}
        root["segments"][0]["frames"].append({"deep": [(1, "x", value)]})
        return root

    _check_detached(root_with(None))
    _check_detached(root_with(b"bytes"))
    for inside, message in ((capsule, "device trace"), (traces, "list of device traces")):
        with pytest.raises(FastFallback, match=message):
            _check_detached(root_with(inside))
    root = root_with(None)
    root["external_annotations"][7]["name"] = root
    with pytest.raises(FastFallback, match="outside the root"):
        _check_detached(root)
    keyed = root_with(None)
    keyed["allocator_settings"] = {(1, capsule): 2}  # a key that leads further
    with pytest.raises(FastFallback, match="device trace"):
        _check_detached(keyed)
    deep: list = [capsule]
    for _ in range(200_000):  # deeper than any recursion could go
        deep = [deep, "x"]
    with pytest.raises(FastFallback, match="device trace"):
        _check_detached(root_with(deep))


def test_a_scanner_id_outside_its_table_falls_back_and_minus_one_is_no_stack(tmp_path):
    """The model's columns look the scanner's ids up in its tables without numpy's bounds
    check (open.py), so the ids are checked first: one outside its table hands the file to
    the streaming decoder; -1, "no stack", is the stack table's last entry."""
    from memtui.open import _model_from_scan

    path = tmp_path / "context_none.pickle"
    path.write_bytes(lzma.decompress((SAMPLES / "context_none.pickle.xz").read_bytes()))
    assert (scan_snapshot(path).traces[0].columns["stack"] == -1).all()  # none recorded: every row "no stack"
    want = open_streaming(path)
    assert _model_from_scan(scan_snapshot(path), path).devices[0].trace.stack.tolist() == \
        want.devices[0].trace.stack.tolist()
    for name, bad in (("stack", lambda s: len(s.stack_offsets)), ("stack", lambda s: -len(s.stack_offsets) - 1),
                      ("action", lambda s: len(s.actions))):
        scanned = scan_snapshot(path)
        column = scanned.traces[0].columns[name].copy()
        column[len(column) // 2] = bad(scanned)
        scanned.traces[0].columns[name] = column
        with pytest.raises(FastFallback, match=f"a {name} id outside"):
            _model_from_scan(scanned, path)
