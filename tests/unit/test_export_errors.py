"""A damaged or foreign export gives one clear line, never a traceback."""

from __future__ import annotations

import pickle

import msgpack
import pytest

from memtui.errors import SnapshotError
from memtui.export.writer import export_snapshot
from memtui.open import open_snapshot
from tests.fixtures.synthetic import synthetic_snapshot


@pytest.fixture(scope="module")
def export_bytes(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("export")
    source = folder / "s.pickle"
    source.write_bytes(pickle.dumps(synthetic_snapshot(events=200), protocol=4))
    out = folder / "s.msgpack"
    export_snapshot(open_snapshot(source), out)
    return out.read_bytes()


def open_bytes(tmp_path, data: bytes):
    path = tmp_path / "x.msgpack"
    path.write_bytes(data)
    return open_snapshot(path)


@pytest.mark.parametrize("cut", [20, 200, 2000, -40, -2])
def test_truncated(tmp_path, export_bytes, cut):
    with pytest.raises(SnapshotError, match="truncated|corrupt"):
        open_bytes(tmp_path, export_bytes[:cut])


def test_newer_version(tmp_path, export_bytes):
    header, rest = _split_header(export_bytes)
    header["version"] = 99
    with pytest.raises(SnapshotError, match="newer memtui"):
        open_bytes(tmp_path, msgpack.packb(header) + rest)


def test_garbage_after_header(tmp_path, export_bytes):
    header, _ = _split_header(export_bytes)
    with pytest.raises(SnapshotError, match="x.msgpack: (corrupt|truncated)"):
        open_bytes(tmp_path, msgpack.packb(header) + b"\xc1\xc1\xc1garbage")


def test_wrong_shapes(tmp_path, export_bytes):
    header, _ = _split_header(export_bytes)
    body = msgpack.packb({"kind": "tables", "actions": 3, "strings": [], "frames": [], "stacks": []})
    with pytest.raises(SnapshotError, match="corrupt memtui export"):
        open_bytes(tmp_path, msgpack.packb(header) + body)


def test_compressed_export_opens(tmp_path, export_bytes):
    import gzip

    snap = open_bytes(tmp_path, gzip.compress(export_bytes))
    assert snap.header["format"] == "memtui"


def _split_header(data: bytes):
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    header = next(unpacker)
    return header, data[unpacker.tell():]
