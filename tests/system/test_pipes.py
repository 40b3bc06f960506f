"""Named pipes, /dev/stdin and devices: refused in one line at once, never waited on.

A snapshot is read by offset and more than once (the cache key hashes both ends, the
decoders may fall back and start again), so a pipe cannot be read: opening one for
reading would wait for a writer forever. Each case runs the real command in a process of
its own and must end within a second of what starting memtui itself costs on this machine
(measured in the same test, so a loaded machine does not fail it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from memtui.cache.store import ModelCache
from memtui.open import open_snapshot
from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")

REFUSAL = "a pipe, not a regular file"


def memtui(*args: str, **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "memtui", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, PYTHONPATH=str(ROOT)), **kwargs)
    return done, time.monotonic() - start


@pytest.fixture(scope="module")
def startup() -> float:
    """Seconds memtui takes to start and print its version here, now."""
    return min(memtui("--version")[1] for _ in range(2))


def refused_in_one_line(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["info", "export"])
def test_a_named_pipe_without_a_writer_is_refused_at_once(tmp_path, startup, command):
    fifo = tmp_path / "snapshot.pickle"
    os.mkfifo(fifo)
    extra = ["-o", str(tmp_path / "out.msgpack")] if command == "export" else []
    done, took = memtui(command, "--cache-dir", str(tmp_path / "cache"), str(fifo), *extra)
    refused_in_one_line(done, REFUSAL)
    assert took < startup + 1.0


def test_a_named_pipe_with_a_writer_is_refused_at_once(tmp_path, startup):
    fifo = tmp_path / "snapshot.pickle"
    os.mkfifo(fifo)
    snapshot = write_tiny_snapshot(tmp_path)
    # The writer blocks until a reader opens the pipe, then until the reader goes away.
    writer = subprocess.Popen(["sh", "-c", f"cat '{snapshot}' > '{fifo}'"], stderr=subprocess.DEVNULL)
    try:
        done, took = memtui("info", "--no-cache", str(fifo))
    finally:
        writer.kill()
        writer.wait()
    refused_in_one_line(done, REFUSAL)
    assert took < startup + 1.0


def test_standard_input_from_a_pipe_is_refused_at_once(tmp_path, startup):
    snapshot = write_tiny_snapshot(tmp_path)
    with open(snapshot, "rb") as fh:
        data = fh.read()
    done, took = memtui("info", "--no-cache", "/dev/stdin", input=data.decode("latin-1"))
    refused_in_one_line(done, REFUSAL)
    assert took < startup + 1.0


def test_standard_input_from_a_file_is_read(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    with open(snapshot, "rb") as fh:
        done, _ = memtui("info", "--no-cache", "--json", "/dev/stdin", stdin=fh)
    assert done.returncode == 0, done.stderr


def test_the_explorer_refuses_a_pipe_before_taking_the_terminal(tmp_path, startup):
    fifo = tmp_path / "snapshot.pickle"
    os.mkfifo(fifo)
    done, took = memtui(str(fifo))
    refused_in_one_line(done, REFUSAL)
    assert took < startup + 1.0


def test_a_device_is_refused(tmp_path):
    done, _ = memtui("info", "--no-cache", os.devnull)
    refused_in_one_line(done, "a device, not a regular file")


def test_a_pipe_where_the_cache_file_should_be_is_replaced(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"))
    cache.check_writable()
    entry = cache.path_for(snapshot)
    os.mkfifo(entry)
    opened = []
    worker = threading.Thread(target=lambda: opened.append(open_snapshot(snapshot, cache=cache)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the open waited on the pipe in the cache folder"
    cache.wait()
    assert opened and os.path.isfile(entry)  # the pipe went; the model was written in its place
    assert ModelCache(str(tmp_path / "cache")).load(snapshot) is not None
