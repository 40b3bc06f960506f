"""Atomic writes: a target is either the complete new file or untouched, never half written."""

from __future__ import annotations

import os
import pickle

import pytest

from memtui.atomic import OutputExistsError, WriteError, atomic_write, write_bytes_atomic
from memtui.cli import main
from memtui.errors import UsageError
from memtui.export.writer import export_snapshot
from memtui.open import open_snapshot
from tests.fixtures.synthetic import synthetic_snapshot


def test_new_file_appears_complete(tmp_path):
    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"hello")
    assert target.read_bytes() == b"hello"
    assert os.listdir(tmp_path) == ["out.bin"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_existing_target_needs_force(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(OutputExistsError, match="--force"):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    target.chmod(0o640)
    write_bytes_atomic(target, b"new", force=True)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o640  # an overwrite keeps the file's mode


def test_failure_leaves_nothing_behind(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_write(target, force=True) as fh:
            fh.write(b"half")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_bad_targets(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        write_bytes_atomic(tmp_path, b"x")
    with pytest.raises(WriteError, match="no such directory"):
        write_bytes_atomic(tmp_path / "missing" / "out.bin", b"x")


def test_interrupted_export_leaves_no_partial_file(tmp_path):
    source = tmp_path / "s.pickle"
    source.write_bytes(pickle.dumps(synthetic_snapshot(events=3000), protocol=4))
    snapshot = open_snapshot(source)
    target = tmp_path / "out.msgpack"

    def cancel(stage, done, total):
        if stage == "exporting" and done > 0:
            raise KeyboardInterrupt

    import memtui.export.writer as writer

    old_chunk = writer.CHUNK_EVENTS
    writer.CHUNK_EVENTS = 100  # several chunks, so the interruption lands mid-file
    try:
        with pytest.raises(KeyboardInterrupt):
            export_snapshot(snapshot, target, progress=cancel)
    finally:
        writer.CHUNK_EVENTS = old_chunk
    assert sorted(os.listdir(tmp_path)) == ["s.pickle"]


def test_cli_force(tmp_path, capsys):
    source = tmp_path / "s.pickle"
    source.write_bytes(pickle.dumps(synthetic_snapshot(events=50), protocol=4))
    target = tmp_path / "out.msgpack"
    target.write_bytes(b"keep me")
    assert main(["export", str(source), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err and err.count("\n") == 1
    assert target.read_bytes() == b"keep me"
    assert main(["export", str(source), "-o", str(target), "--force"]) == 0
    assert target.read_bytes()[1:].startswith(b"\xa6format\xa6memtui")  # a msgpack map, format first
    converted = tmp_path / "out.pickle"
    converted.write_bytes(b"keep me too")
    assert main(["convert", str(target), "-o", str(converted)]) == 2
    assert converted.read_bytes() == b"keep me too"
    assert main(["convert", str(target), "-o", str(converted), "--force"]) == 0
    assert pickle.loads(converted.read_bytes())["device_traces"]


def test_a_forced_exit_removes_the_temporary_files_being_written(tmp_path):
    # The explorer's watchdog ends a process whose main thread could not act on a signal in
    # time with os._exit; the cache writer's file must not outlive it.
    from memtui import atomic

    fd, tmp = atomic.make_temp_file(tmp_path / "model.mtc")
    os.write(fd, b"half")
    os.close(fd)
    assert os.path.exists(tmp)
    atomic.remove_temp_files_being_written()
    assert not os.path.exists(tmp)


def test_finished_writes_are_forgotten(tmp_path):
    from memtui import atomic

    before = set(atomic._being_written)
    atomic.write_bytes_atomic(tmp_path / "a", b"whole")
    with pytest.raises(RuntimeError), atomic.atomic_write(tmp_path / "b") as fh:
        fh.write(b"half")
        raise RuntimeError("stopped")
    assert atomic._being_written == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]
