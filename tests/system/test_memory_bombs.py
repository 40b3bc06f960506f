"""Files built to exhaust memory or time get one line, at once, not an exhausted machine.

Declared lengths larger than the file (strings, bytes, long integers, frames), lines and
objects that inflate without end from a compressed file, deep nesting, and repeats that
multiply one trace into billions of rows. One run happens under an address-space limit
far below what the declared sizes would need, to show nothing tries to allocate them.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pickle
import struct
import subprocess
import sys
import time

import pytest

from memtui.errors import SnapshotError
from memtui.load.limits import find_false_length
from memtui.load.read import read_snapshot
from memtui.open import open_snapshot
from tests.conftest import ROOT
from tests.fixtures import variants

TIB = 1 << 40
PROTO4 = b"\x80\x04"


def declared(opcode: bytes, length_format: str, length: int, proto: bytes = PROTO4) -> bytes:
    return proto + opcode + struct.pack(length_format, length) + b"abc."


BOMBS = {
    "BINUNICODE8 1 TiB": declared(b"\x8d", "<Q", TIB),
    "BINBYTES8 1 TiB": declared(b"\x8e", "<Q", TIB),
    "BINBYTES8 16 GiB": declared(b"\x8e", "<Q", 16 << 30),
    "BYTEARRAY8 1 TiB": declared(b"\x96", "<Q", TIB, b"\x80\x05"),
    "BINUNICODE 4 GiB": declared(b"X", "<I", (1 << 32) - 1),
    "LONG4 2 GiB": declared(b"\x8b", "<i", (1 << 31) - 1),
    "BINSTRING negative": declared(b"T", "<i", -5, b"\x80\x02"),
    "FRAME 1 TiB": declared(b"\x95", "<Q", TIB),
    "string in a frame": PROTO4 + b"\x95" + struct.pack("<Q", 13) + b"\x8d" + struct.pack("<Q", TIB) + b"abc.",
}
COMPRESSORS = {"plain": None, "gzip": gzip.compress, "xz": lzma.compress, "bz2": bz2.compress}


def loaders():
    return {
        "plain": read_snapshot,
        "streaming": lambda p: open_snapshot(p, streaming=True, cache=None),
        "model": lambda p: open_snapshot(p, streaming=False, cache=None),
    }


@pytest.mark.parametrize("compression", list(COMPRESSORS))
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_declared_lengths_past_the_file_are_refused(tmp_path, bomb, compression):
    data = BOMBS[bomb]
    compress = COMPRESSORS[compression]
    path = tmp_path / "bomb.pickle"
    path.write_bytes(compress(data) if compress else data)
    for name, load in loaders().items():
        start = time.monotonic()
        with pytest.raises(SnapshotError) as refused:
            load(path)
        message = str(refused.value)
        assert time.monotonic() - start < 5, name
        assert "\n" not in message and message.startswith("bomb.pickle: ")
        if compression == "plain":
            assert "declares" in message and "of the file remain" in message, message
        else:
            assert "declares" in message or "truncated" in message, message
        assert "not enough memory" not in message


def test_declared_lengths_are_found_by_the_opcode_walk():
    assert find_false_length(BOMBS["BINBYTES8 1 TiB"], len(BOMBS["BINBYTES8 1 TiB"])) == (11, TIB)
    assert find_false_length(BOMBS["string in a frame"], None) == (20, TIB)
    ok = pickle.dumps(variants.modern(), protocol=4)
    assert find_false_length(ok, len(ok)) is None


def test_nothing_is_allocated_for_a_declared_length(tmp_path):
    # 16 GiB and 1 TiB claims under a 1.5 GiB address-space limit: a loader that believed
    # them would fail with MemoryError or be killed; this one names the lie.
    paths = []
    for name in ("BINBYTES8 16 GiB", "BINUNICODE8 1 TiB", "BYTEARRAY8 1 TiB"):
        path = tmp_path / f"{len(paths)}.pickle"
        path.write_bytes(BOMBS[name])
        paths.append(str(path))
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))\n"
        "from memtui.cli import main\n"
        "sys.exit(max(main(['info', '--no-cache', p]) for p in sys.argv[1:]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True, timeout=60,
                            cwd=ROOT, env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 3 and all("declares" in line and "Traceback" not in line for line in lines), lines


def test_a_compressed_line_that_never_ends_is_refused(tmp_path, monkeypatch):
    import memtui.load.limits as limits

    monkeypatch.setattr(limits, "MAX_COMPRESSED_ITEM", 1 << 20)  # 256 MiB in real life: too slow to inflate here
    path = tmp_path / "line.pickle.xz"
    path.write_bytes(lzma.compress(b"S'" + b"a" * (2 << 20)))
    for load in loaders().values():
        with pytest.raises(SnapshotError, match="a line of pickle text longer than 1.00 MiB"):
            load(path)


def test_a_compression_bomb_is_refused(tmp_path, monkeypatch):
    # A real bomb inflates past a gigabyte; the limits are scaled down to keep the test fast.
    import memtui.load.limits as limits

    monkeypatch.setattr(limits, "INFLATION_FLOOR", 1 << 20)
    payload = pickle.dumps({"segments": [], "device_traces": [], "pad": b"\0" * (8 << 20)}, protocol=4)
    path = tmp_path / "bomb.pickle.xz"
    path.write_bytes(lzma.compress(payload))
    assert len(payload) > limits.MAX_INFLATION * path.stat().st_size
    for load in loaders().values():
        with pytest.raises(SnapshotError, match="inflates to more than 1000 times its size"):
            load(path)


def deep_list_pickle(depth: int) -> bytes:
    # MARK ... LIST pairs build the nesting without recursion in the pickler.
    return PROTO4 + b"(" * depth + b"]" + b"l" * depth + b"."


def test_deep_nesting_is_refused_in_one_line(tmp_path):
    path = tmp_path / "deep.pickle"
    path.write_bytes(deep_list_pickle(200_000))
    for load in loaders().values():
        with pytest.raises(SnapshotError, match="not a memory snapshot"):
            load(path)


def test_deep_values_inside_a_snapshot_load_with_bounded_text(tmp_path):
    # A frame name, a compile context and an annotation nested 100,000 deep: the loader
    # and the model never recurse into them.
    depth = 100_000
    deep = b"(" * depth + b"]" + b"l" * depth
    snap = variants.modern()
    marker = "DEEP-VALUE-MARKER"
    snap["device_traces"][0][1]["frames"] = [{"filename": marker, "line": 1, "name": marker}]
    snap["device_traces"][0][1]["compile_context"] = marker
    snap["external_annotations"] = [{"stage": "START", "name": marker, "device": 0, "time_us": 1}]
    data = pickle.dumps(snap, protocol=2)
    needle = b"X" + struct.pack("<I", len(marker)) + marker.encode()  # pushes the string; later uses are GETs
    assert data.count(needle) == 1
    data = data.replace(needle, deep)
    path = tmp_path / "deep-values.pickle"
    path.write_bytes(data)
    from memtui.model.checks import check_snapshot

    for streaming in (True, False):
        snapshot = open_snapshot(path, streaming=streaming, cache=None)
        check_snapshot(snapshot)
        assert "[[[[...]]]]" in snapshot.strings.values and snapshot.annotations[0].name == "[[[[...]]]]"
        assert all(len(text) < 200 for text in snapshot.strings.values)


def test_repeats_that_multiply_rows_are_refused(tmp_path):
    snap = variants.modern()
    # Distinct entries (an entry repeated by reference is refused sooner, by the shape
    # check: tests/system/test_compressed_bombs.py), one trace named 4,000 times.
    trace = [dict(entry) for entry in snap["device_traces"][0] * 60]
    snap["device_traces"] = [trace] * 4000  # over a million rows from a file of some 20 KB
    path = tmp_path / "repeats.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    assert path.stat().st_size < 100_000
    for load in loaders().values():
        start = time.monotonic()
        with pytest.raises(SnapshotError, match="repeats the same traces or segments"):
            load(path)
        assert time.monotonic() - start < 5


def test_a_hundred_thousand_empty_devices_are_refused(tmp_path):
    snap = variants.modern()
    snap["device_traces"] += [[] for _ in range(100_000)]
    path = tmp_path / "devices.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    for load in (loaders()["streaming"], loaders()["model"]):
        with pytest.raises(SnapshotError, match="at most 4,096 devices"):
            load(path)


def test_settings_that_share_one_list_many_times_stay_small(tmp_path):
    # A "billion laughs": thirty levels of a list holding the level below a thousand times.
    level: list = ["x"]
    for _ in range(30):
        level = [level] * 1000
    snap = variants.modern(allocator_settings={"PYTORCH_CUDA_ALLOC_CONF": level})
    path = tmp_path / "laughs.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    start = time.monotonic()
    snapshot = open_snapshot(path, cache=None)
    assert time.monotonic() - start < 5
    from memtui.services.info import render_text, summarize

    assert len(render_text(snapshot, summarize(snapshot))) < 1_000_000


def test_a_refused_bytearray_leaves_no_exported_buffer(tmp_path):
    # A BYTEARRAY8 claim refused while the unpickler reads into the new bytearray: a view of
    # it kept alive by the traceback made CPython print "SystemError: deallocated bytearray
    # object has exported buffers" when the bytearray went, on both decoders.
    path = tmp_path / "bytearray.pickle"
    path.write_bytes(BOMBS["BYTEARRAY8 1 TiB"])
    script = (
        "import gc, sys\n"
        "from memtui.errors import SnapshotError\n"
        "from memtui.open import open_snapshot\n"
        "for streaming in (True, False):\n"
        "    try:\n"
        "        open_snapshot(sys.argv[1], streaming=streaming, cache=None)\n"
        "    except SnapshotError as exc:\n"
        "        print(exc)\n"
        "    gc.collect()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60,
                            cwd=ROOT, env=env)
    assert result.returncode == 0 and result.stdout.count("declares") == 2, result
    assert result.stderr == "", result.stderr
