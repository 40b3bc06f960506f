"""Compressed files cut short or damaged, and files that change while they are read.

Every case ends in one line and exit status 2, through the plain and the streaming
decoder; a file that changes under the reader (appended to, touched, replaced) is refused
rather than turned into a model of two versions at once.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pickle
import shutil

import pytest

from memtui.cli import main
from memtui.errors import SnapshotError
from memtui.load.read import read_snapshot
from memtui.open import open_snapshot
from tests.conftest import SHARED
from tests.fixtures import variants

zstandard = pytest.importorskip("zstandard")

COMPRESSORS = {
    "gzip": gzip.compress,
    "xz": lzma.compress,
    "bz2": bz2.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


def payload() -> bytes:
    real = SHARED / "multistream.pickle"
    return real.read_bytes() if real.exists() else pickle.dumps(variants.modern(), protocol=4)


def damaged(compress, how: str) -> bytes:
    data = compress(payload())
    if how == "truncated":
        return data[: len(data) * 2 // 3]
    middle = bytearray(data)
    for k in range(len(middle) // 3, len(middle) // 3 + 16):
        middle[k] ^= 0x5A
    return bytes(middle)


def loads():
    return (read_snapshot, lambda p: open_snapshot(p, streaming=True, cache=None),
            lambda p: open_snapshot(p, streaming=False, cache=None))


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
@pytest.mark.parametrize("compression", list(COMPRESSORS))
def test_damaged_compressed_files(tmp_path, capsys, compression, how):
    path = tmp_path / "snap.pickle.z"
    path.write_bytes(damaged(COMPRESSORS[compression], how))
    for load in loads():
        with pytest.raises(SnapshotError) as refused:
            load(path)
        assert "\n" not in str(refused.value)
    assert main(["info", "--no-cache", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def copy_of_real(tmp_path):
    source = SHARED / "multistream.pickle"
    if not source.exists():
        pytest.skip(f"no real snapshot at {source}")
    path = tmp_path / "growing.pickle"
    shutil.copyfile(source, path)
    return path


def change_on_first_read(path, change):
    done = []

    def progress(stage: str, consumed: int, total: int) -> None:
        if stage == "reading" and not done:
            done.append(True)
            change(path)

    return progress


def append(path) -> None:
    with open(path, "ab") as fh:
        fh.write(b"more bytes from the writer")


def touch(path) -> None:
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def replace(path) -> None:
    other = path.with_name("other.pickle")
    other.write_bytes(pickle.dumps(variants.modern(), protocol=4))
    os.replace(other, path)


@pytest.mark.parametrize("change", [append, touch, replace])
def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path, change):
    path = copy_of_real(tmp_path)
    with pytest.raises(SnapshotError, match="changed while it was being read"):
        read_snapshot(path, change_on_first_read(path, change))
    path = copy_of_real(tmp_path)
    with pytest.raises(SnapshotError, match="changed while it was being read"):
        open_snapshot(path, change_on_first_read(path, change), streaming=False, cache=None)


@pytest.mark.parametrize("change", [touch, replace])
def test_the_streaming_decoder_refuses_a_changed_file(tmp_path, change):
    # (An append makes the streaming decoder hand the file to the plain path, which
    # then reads the new content whole; see the test above for that path.)
    path = copy_of_real(tmp_path)
    with pytest.raises(SnapshotError, match="changed while it was being read"):
        open_snapshot(path, change_on_first_read(path, change), streaming=True, cache=None)


def test_a_file_that_disappears_while_it_is_read(tmp_path):
    path = copy_of_real(tmp_path)
    with pytest.raises(SnapshotError, match="disappeared while it was being read"):
        read_snapshot(path, change_on_first_read(path, os.unlink))


def test_a_changed_file_is_not_cached(tmp_path):
    from memtui.cache.store import ModelCache

    path = copy_of_real(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"))
    with pytest.raises(SnapshotError):
        open_snapshot(path, change_on_first_read(path, touch), cache=cache)
    cache.wait()
    assert not list((tmp_path / "cache").rglob("*.mtc"))
    fresh = open_snapshot(path, cache=cache)  # read again once it is stable: fine, and cached
    cache.wait()
    assert len(fresh.devices[0].trace) and list((tmp_path / "cache").rglob("*.mtc"))
