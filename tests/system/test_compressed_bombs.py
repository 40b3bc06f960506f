"""Compressed bombs and a sparse file of zeros are refused in one line, within 5 s, under 1 GiB.

The bombs are rebuilt here from tests/fixtures/compressed_bombs.py (each inflates to
2 GiB) and opened by the real command line in one process whose address space is limited
to 1 GiB, so a loader that built what they describe would fail or be killed, not pass.
The shape check (memtui/load/shape.py) refuses them from their first bytes; the cases at
the end cover what it lets through and a bomb that begins like a real file.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

import memtui.load.stream
from memtui.errors import SnapshotError
from memtui.load.read import read_snapshot
from memtui.open import open_snapshot
from tests.conftest import ROOT
from tests.fixtures import variants
from tests.fixtures.compressed_bombs import build_all, snapshot_parts, write_bomb

LIMIT = 1 << 30
SECONDS = 5.0

# Each bomb opened by `memtui info` in turn, in one process under the limit: a JSON line per bomb.
UNDER_A_LIMIT = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (BYTES, BYTES))
from memtui.cli import main
for path in sys.argv[1:]:
    start = time.monotonic()
    code = main(["info", "--no-cache", path])
    sys.stderr.flush()
    print(json.dumps({"path": path, "code": code, "seconds": time.monotonic() - start}), flush=True)
""".replace("BYTES", str(LIMIT))

EXPECTED = {
    "xz list": "not a memory snapshot (a list of int, not of segments)",
    "gzip list": "not a memory snapshot (a list of int, not of segments)",
    "bz2 list": "not a memory snapshot (a list of int, not of segments)",
    "xz snapshot": "a device trace repeats an entry by reference",
    "zstd snapshot": "a device trace repeats an entry by reference",
    "sparse zeros": "a frame of 2.00 GiB, where picklers write frames of 64 KiB",
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return build_all(tmp_path_factory.mktemp("bombs"))


def test_every_bomb_is_refused_in_one_line_within_seconds_under_a_gigabyte(bombs):
    names = list(bombs)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", UNDER_A_LIMIT, *(str(bombs[n]) for n in names)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    lines = done.stderr.strip().splitlines()
    assert len(results) == len(names) and len(lines) == len(names), (done.stdout, done.stderr)
    for name, result, line in zip(names, results, lines):
        assert result["code"] == 2, (name, line)
        assert result["seconds"] < SECONDS, (name, result)
        assert line.startswith(f"memtui: {bombs[name].name}: ") and EXPECTED[name] in line, (name, line)
        assert "not enough memory" not in line


@pytest.mark.parametrize("name", ["xz list", "xz snapshot", "sparse zeros"])
def test_each_reader_refuses_a_bomb_by_its_start(bombs, name):
    for load in (read_snapshot, lambda p: open_snapshot(p, cache=None)):
        with pytest.raises(SnapshotError, match=EXPECTED[name].replace("(", r"\(").replace(")", r"\)")):
            load(bombs[name])


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("build", ["modern", "one entry per trace", "segments only", "list of segments"])
def test_snapshots_of_every_protocol_and_layout_pass(tmp_path, protocol, build):
    snap = variants.modern()
    if build == "one entry per trace":  # a batch of one: APPEND, no MARK
        snap["device_traces"] = [[dict(trace[0])] for trace in snap["device_traces"] if trace] * 1
        snap["device_traces"].append([dict(snap["device_traces"][0][0])])
    elif build == "segments only":
        snap["device_traces"] = []
    obj = snap["segments"] if build == "list of segments" else snap
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    assert open_snapshot(path, cache=None) is not None


def test_frames_shared_between_entries_are_not_repeated_entries(tmp_path):
    # Torch shares frame dicts and a free's frame list with its request: references inside
    # entries are ordinary; only an entry that is itself a reference is refused.
    snap = variants.modern()
    trace = snap["device_traces"][0]
    frame = {"filename": "train.py", "line": 1, "name": "step"}
    for entry in trace:
        entry["frames"] = [frame, frame]
    path = tmp_path / "shared.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    assert open_snapshot(path, cache=None) is not None


def test_an_entry_repeated_by_reference_is_refused_at_any_protocol(tmp_path):
    snap = variants.modern()
    entry = snap["device_traces"][0][0]
    snap["device_traces"][0] = [entry] * 5000
    for protocol in (2, 4):
        path = tmp_path / f"repeat{protocol}.pickle"
        path.write_bytes(pickle.dumps(snap, protocol=protocol))
        with pytest.raises(SnapshotError, match="repeats an entry by reference"):
            open_snapshot(path, cache=None)


def test_a_list_of_strings_is_refused_like_the_model_refuses_it(tmp_path):
    path = tmp_path / "strings.pickle"
    path.write_bytes(pickle.dumps(["a", "b"], protocol=4))
    with pytest.raises(SnapshotError) as refused:
        open_snapshot(path, cache=None)
    assert "not a memory snapshot (a list of str" in str(refused.value)


def test_a_bomb_that_starts_like_a_snapshot_is_refused_by_the_first_reader(tmp_path, monkeypatch):
    # Real entries first, the repeats only past what the shape check reads: the inflation
    # bound refuses it, and the first decoder to meet it says so for all (no second pass).
    import memtui.load.limits as limits
    import memtui.open as opening

    monkeypatch.setattr(limits, "INFLATION_FLOOR", 8 << 20)
    head, piece, tail = snapshot_parts()
    entry_end = head.rindex(b"a")
    fresh = head[head.index(b"}\x94(", 5):entry_end] * 200  # 200 genuine entries before the repeats
    path = write_bomb(tmp_path / "late.pickle.xz", (b"\x80\x04" + head[2:entry_end] + b"(" + fresh + b"e",
                                                    piece, tail), "xz", size=64 << 20)
    monkeypatch.setattr(opening, "open_plain", lambda *a, **k: pytest.fail("fell back to the plain path"))
    with pytest.raises(SnapshotError, match="inflates to more than"):
        open_snapshot(path, cache=None)


@pytest.mark.parametrize("name", ["xz list", "gzip list", "bz2 list", "xz snapshot", "zstd snapshot",
                                  "batched list"])
def test_a_compressed_bomb_is_handed_over_by_the_scanner_at_its_start(bombs, tmp_path, name, monkeypatch):
    # The compiled scanner reads a compressed file first too, through the inflation bound,
    # and the shape check runs only when it hands the file over: it must hand over what the
    # check refuses within the bytes the check reads (a list of integers appended in batches
    # of a thousand, which never fills its stack, once took it 1.5 s and 400 MB at 128 MiB
    # inflated), no other decoder may read the file, and the refusal is the check's own.
    import lzma

    if name == "batched list":
        bomb = tmp_path / "batched.pickle.xz"
        bomb.write_bytes(lzma.compress(b"\x80\x04]\x94" + (b"(" + b"K\x00" * 1000 + b"e") * 20_000 + b".",
                                       preset=1))
    else:
        bomb = bombs[name]
    _assert_handed_over_at_its_start(bomb, monkeypatch)


def _assert_handed_over_at_its_start(bomb, monkeypatch) -> None:
    """The scanner reads ``bomb`` first and hands it over within the shape check's window;
    no other decoder reads it; the refusal is the check's."""
    import memtui.open as opening
    from memtui.load.fast import FastFallback, available
    from memtui.load.shape import WINDOW, check_start
    from memtui.load.source import inspect_source

    if not available():
        pytest.skip("the compiled scanner is not built")
    with pytest.raises(SnapshotError) as by_the_check:
        check_start(inspect_source(bomb))
    handed_over: list[FastFallback] = []
    scan = opening.scan_snapshot

    def scan_watched(*args, **kwargs):
        try:
            return scan(*args, **kwargs)
        except FastFallback as exc:
            handed_over.append(exc)
            raise

    def never(*args, **kwargs):
        raise AssertionError("a decoder read a file the shape check refuses")

    monkeypatch.setattr(opening, "scan_snapshot", scan_watched)
    monkeypatch.setattr(memtui.load.stream, "stream_snapshot", never)
    with pytest.raises(SnapshotError) as refused:
        open_snapshot(bomb, cache=None)
    assert str(refused.value) == str(by_the_check.value)
    assert len(handed_over) == 1, "the scanner did not read the file first"
    at = int(str(handed_over[0]).rsplit("at byte ", 1)[1].rstrip(")").replace(",", ""))
    assert at < WINDOW, (str(handed_over[0]), at)


def _uncompressed_bomb(name: str, folder) -> bytes:
    """The bytes of an uncompressed file the shape check refuses, each past what it reads."""
    import struct

    head, piece, tail = snapshot_parts(1 << 20)
    in_trace = head.index(b"]\x94]\x94") + 4  # where the one trace's entries start
    batch = b"(" + b"K\x00" * 1000 + b"e"
    if name == "list":
        return b"\x80\x04]\x94" + b"K\x00" * 1_000_000 + b"a."  # 2 MB
    if name == "batched list":
        return b"\x80\x04]\x94" + batch * 1_000 + b"."
    if name == "snapshot":  # the trace's one entry repeated by its memo slot
        return head + piece * 8 + tail
    if name == "dropped reference":  # the top dict pushed into the trace by reference, then popped
        return head[:in_trace] + b"h\x000" + head[in_trace:] + tail
    if name == "batch of references":  # a batch of references to the top dict in the trace
        return head[:in_trace] + b"(" + b"h\x00" * 1_000_000 + b"e" + head[in_trace:] + tail
    if name == "duplicated top":  # a duplicate of the top dict, its 'device_traces' lists of references
        return (b"\x80\x04}\x94" b"2" b"\x8c\x0ddevice_traces" b"]]" + (b"(" + b"h\x00" * 1000 + b"e") * 1_000
                + b"as0.")
    if name == "frame past the end":  # a frame of 64 MiB in a file of 2 MB, strings built inside it
        body = b"}\x8c\x01k]" + (b"(" + b"\x8c\x02ab" * 1000 + b"e") * 400 + b"s."
        return b"\x80\x04\x95" + struct.pack("<Q", 64 << 20) + body
    if name == "one long frame":  # a snapshot otherwise good, in one frame longer than picklers write
        body = pickle.dumps(variants.modern(padding=b"\x00" * (65 << 20)), protocol=3)[2:]
        return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body
    raise AssertionError(name)


UNCOMPRESSED = ["sparse zeros", "list", "batched list", "snapshot", "dropped reference", "batch of references",
                "duplicated top", "frame past the end", "one long frame"]


@pytest.mark.parametrize("name", UNCOMPRESSED)
def test_an_uncompressed_bomb_is_handed_over_by_the_scanner_at_its_start(bombs, tmp_path, name, monkeypatch):
    # Over an uncompressed file the compiled scanner reads first, and the shape check runs
    # only when it hands the file over (memtui/open.py): it must hand over what the check
    # refuses within the bytes the check reads, before building anything.
    if name == "sparse zeros":
        bomb = bombs[name]
    else:
        bomb = tmp_path / "bomb.pickle"
        bomb.write_bytes(_uncompressed_bomb(name, tmp_path))
    _assert_handed_over_at_its_start(bomb, monkeypatch)


@pytest.mark.parametrize("name", [n for n in UNCOMPRESSED if n != "sparse zeros"])
def test_every_reader_refuses_an_uncompressed_bomb_alike(tmp_path, name, monkeypatch):
    # The scanner first, the plain path, the loader alone (export, live replay) and a build
    # without the scanner: one answer, the shape check's, whichever reads the file.
    import memtui.load.fast as fast

    bomb = tmp_path / "bomb.pickle"
    bomb.write_bytes(_uncompressed_bomb(name, tmp_path))
    said = set()
    for read in (lambda: open_snapshot(bomb, cache=None), lambda: open_snapshot(bomb, cache=None, streaming=False),
                 lambda: read_snapshot(bomb)):
        with pytest.raises(SnapshotError) as refused:
            read()
        said.add(str(refused.value))
    monkeypatch.setattr(fast, "enabled", False)
    with pytest.raises(SnapshotError) as refused:
        open_snapshot(bomb, cache=None)
    said.add(str(refused.value))
    assert len(said) == 1, said


def test_the_scanner_and_the_shape_check_allow_the_same_longest_frame():
    from memtui.load import shape
    from memtui.load.fast import _native

    if _native is None:
        pytest.skip("the compiled scanner is not built")
    assert _native.MAX_FRAME == shape.MAX_FRAME
