"""SIGKILL in the middle of an export or a cache write: the old file or none, never a partial one.

A process killed with SIGKILL cannot clean up, so its temporary file stays behind; the
next memtui that writes into (or opens a cache in) that folder removes it, because the
process named in it is gone. To kill at a known point, the process under test runs the
real command with its writes slowed down (the export) or its rename stalled (the cache);
the slow test at the end kills a real export of the million-event file, unpatched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtui.cache.store import ModelCache
from memtui.open import open_snapshot
from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

STALLED_EXPORT = """
import sys, time
from contextlib import contextmanager
import memtui.export.writer as writer

real_atomic_write = writer.atomic_write

class StallsMidway:
    def __init__(self, fh):
        self.fh, self.written = fh, 0

    def write(self, data):
        n = self.fh.write(data)
        self.written += len(data)
        if self.written > 2048:
            self.fh.flush()
            time.sleep(120)  # killed here, half written
        return n

    def __getattr__(self, name):
        return getattr(self.fh, name)

@contextmanager
def stalled_atomic_write(path, force=False):
    with real_atomic_write(path, force) as fh:
        yield StallsMidway(fh)

writer.atomic_write = stalled_atomic_write
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""

STALLED_RENAME = """
import os, sys, time
os.replace = lambda *names: time.sleep(120)  # killed here: the temporary file is written, not yet renamed
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def environment() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def start(script: str | None, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "memtui"]
    return subprocess.Popen([*command, *args], cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".partial")]


def kill_when(process: subprocess.Popen, ready, timeout: float = 60) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` is true."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"it finished before it could be killed: {process.stderr.read()!r}"
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def run_memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui", *args], cwd=ROOT, env=environment(), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("old_target", [True, False], ids=["over-an-old-export", "new-file"])
def test_kill_during_an_export(tmp_path, old_target):
    snapshot = write_tiny_snapshot(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "events.msgpack"
    if old_target:
        first = run_memtui("export", "--no-cache", str(snapshot), "-o", str(target), "-f", "action:alloc")
        assert first.returncode == 0, first.stderr
    before = target.read_bytes() if old_target else None

    export = start(STALLED_EXPORT, "export", "--no-cache", str(snapshot), "-o", str(target), "--force")
    kill_when(export, lambda: any(p.stat().st_size > 2048 for p in temp_files(out_dir)))

    assert (target.read_bytes() if target.exists() else None) == before  # untouched, or still absent
    assert len(temp_files(out_dir)) == 1  # the killed process's leftover, half written

    again = run_memtui("export", "--no-cache", str(snapshot), "-o", str(target), "--force")
    assert again.returncode == 0, again.stderr
    assert temp_files(out_dir) == []
    assert len(open_snapshot(target, cache=None).devices[0].trace) > 0


def test_kill_during_a_cache_write(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    cache_dir = tmp_path / "cache"
    info = start(STALLED_RENAME, "info", "--cache-dir", str(cache_dir), str(snapshot))
    folder = Path(ModelCache(str(cache_dir)).folder)
    kill_when(info, lambda: folder.is_dir() and bool(temp_files(folder)))
    assert not list(folder.glob("*.mtc"))  # no cache entry, partial or whole

    again = run_memtui("info", "--cache-dir", str(cache_dir), str(snapshot))
    assert again.returncode == 0, again.stderr
    assert temp_files(folder) == []
    cache = ModelCache(str(cache_dir))
    assert cache.load(snapshot) is not None  # a complete, verified entry


def test_a_temporary_file_of_a_live_process_is_left_alone(tmp_path):
    from memtui.atomic import remove_orphaned_temp_files, write_bytes_atomic

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from memtui import atomic

        live = tmp_path / f".x.memtui-{atomic._host_tag()}-{sleeper.pid}-abc123.partial"
        gone = tmp_path / f".x.memtui-{atomic._host_tag()}-999999999-abc123.partial"
        other_host = tmp_path / ".x.memtui-0badc0de-999999999-abc123.partial"
        foreign = tmp_path / ".x.somebody-else.partial"
        for path in (live, gone, other_host, foreign):
            path.write_bytes(b"half")
        write_bytes_atomic(tmp_path / "x", b"whole")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other_host.name, foreign.name, "x"])
        assert remove_orphaned_temp_files(tmp_path) == []
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow  # exports the million-event file
def test_kill_during_a_real_export_of_a_big_file(tmp_path, big_trace):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "big.msgpack"
    target.write_bytes(b"the previous export")
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_memtui("info", *cache, str(big_trace)).returncode == 0  # warm: the export starts writing at once
    export = start(None, "export", *cache, str(big_trace), "-o", str(target), "--force")
    kill_when(export, lambda: any(p.stat().st_size > 0 for p in temp_files(out_dir)), timeout=120)
    assert target.read_bytes() == b"the previous export"
    assert len(temp_files(out_dir)) == 1
    again = run_memtui("export", *cache, str(big_trace), "-o", str(target), "--force")
    assert again.returncode == 0, again.stderr
    assert temp_files(out_dir) == []
    assert sum(len(d.trace) for d in open_snapshot(target, cache=None).devices) == 1_000_001
