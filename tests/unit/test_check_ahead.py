"""The checks of a kept model started before the imports (memtui/cache/check_ahead.py): the
read takes the checked file only for the very file it reads and only from checks that
passed; anything else leaves the read to check the file by itself, with the same outcome."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memtui import cli
from memtui.cache import check_ahead, file_check, fileformat
from memtui.cache.names import kept_entry
from memtui.cache.store import ModelCache
from memtui.load import ahead
from memtui.open import open_snapshot
from tests.conftest import uncompressed_sample
from tests.fixtures.model_equality import assert_same_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def snapshot(tmp_path) -> Path:
    return uncompressed_sample(tmp_path)


@pytest.fixture(autouse=True)
def nothing_left_over(monkeypatch):
    monkeypatch.setattr(ahead, "MIN_CORES", 1)  # any machine may start them
    check_ahead.discard()
    ahead.discard()
    yield
    check_ahead.discard()
    ahead.discard()


@pytest.fixture
def checks_here(monkeypatch) -> list[str]:
    """The cache files the read checked by itself."""
    calls: list[str] = []
    real = fileformat.check_file

    def counted(path, cores=None):
        calls.append(path)
        return real(path, cores)
    monkeypatch.setattr(fileformat, "check_file", counted)
    return calls


@pytest.fixture
def kept(snapshot, tmp_path) -> tuple[ModelCache, str]:
    cache = ModelCache(str(tmp_path / "cache"))
    cache.store(snapshot, open_snapshot(snapshot))
    entry = kept_entry(cache.root, snapshot)
    assert entry == cache.path_for(snapshot)
    return cache, entry


def test_the_read_takes_the_checks_made_ahead(snapshot, kept, checks_here):
    cache, entry = kept
    want = cache.load(snapshot)
    assert checks_here == [entry]
    check_ahead.start(entry)
    got = cache.load(snapshot)
    assert checks_here == [entry]  # not checked again
    assert_same_model(got, want)
    cache.load(snapshot)  # taken once: a second read checks by itself
    assert checks_here == [entry, entry]


def test_the_command_line_checks_a_kept_model_instead_of_scanning(snapshot, kept, checks_here, monkeypatch):
    cache, entry = kept
    scans: list[str] = []
    monkeypatch.setattr(ahead, "start", lambda path, **kw: scans.append(path) or True)
    cli._scan_ahead(["info", str(snapshot), "--cache-dir", cache.root])
    assert scans == [] and check_ahead._started is not None and check_ahead._started.path == entry
    cache.load(snapshot)
    assert checks_here == []
    cli._scan_ahead(["info", str(snapshot), "--cache-dir", cache.root, "--no-cache"])
    assert scans == [str(snapshot)] and check_ahead._started is None


def test_a_file_replaced_since_its_checks_is_checked_again(snapshot, kept, checks_here):
    cache, entry = kept
    check_ahead.start(entry)
    check_ahead._started.done.wait()
    data = Path(entry).read_bytes()
    os.unlink(entry)
    Path(entry).write_bytes(data)  # the same bytes, another file
    assert cache.load(snapshot) is not None
    assert checks_here == [entry]


def test_a_file_damaged_after_its_checks_is_refused(snapshot, kept, checks_here):
    cache, entry = kept
    check_ahead.start(entry)
    check_ahead._started.done.wait()
    with open(entry, "r+b") as fh:  # rewritten in place: its change time moves
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    assert cache.load(snapshot) is None  # rebuilt, as without the head start
    assert checks_here == [entry]


def test_checks_that_failed_leave_the_read_to_say_why(tmp_path, monkeypatch, checks_here):
    path = str(tmp_path / "entry.mtc")
    fileformat.write_cache_file(path, {"long": np.arange(100_000, dtype=np.int64)}, {})
    data = bytearray(Path(path).read_bytes())
    data[-4096 * 3] ^= 1
    Path(path).write_bytes(bytes(data))
    check_ahead.start(path)
    with pytest.raises(file_check.CorruptCache, match="long checksum"):
        fileformat.read_cache_file(path)
    assert checks_here == [path]


def test_checks_of_another_file_are_not_taken(tmp_path, checks_here):
    one, other = str(tmp_path / "one.mtc"), str(tmp_path / "other.mtc")
    for path in (one, other):
        fileformat.write_cache_file(path, {"a": np.arange(10)}, {})
    check_ahead.start(one)
    arrays, _ = fileformat.read_cache_file(other)
    assert checks_here == [other] and arrays["a"].tolist() == list(range(10))


def test_the_checks_import_no_numpy():
    code = ("import sys; import memtui.cache.check_ahead, memtui.cache.file_check; "
            "sys.exit('numpy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0
