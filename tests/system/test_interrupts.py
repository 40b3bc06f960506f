"""Ctrl-C, SIGTERM and SIGHUP end a command in one line with 128 + the signal, leaving no file behind.

The deterministic cases stop a process where it used to go wrong: in the middle of the
model cache's background write, with the main thread waiting for it (a Ctrl-C there
printed a 15-line traceback from ``threading.join``, and SIGTERM left a ``.partial`` file of
hundreds of megabytes). The random cases (tests/fixtures/interrupt_runs.py) signal real
runs of ``info``, ``export``, ``convert`` and the explorer at moments drawn with a fixed
seed; the long run over a 10M-event file is that module as a script (docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtui.cache.store import ModelCache
from tests.conftest import ROOT
from tests.fixtures.interrupt_runs import default_signals, measure_duration, run_once
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

# The cache write stalls in one piece (a slow disk), or crawls through its pieces: each piece
# of the cache file's data goes through a wrapper that waits before it is stored. The
# crawling pieces wait, after the first, until the write is told to stop: however late the
# signal is handled on a busy machine, the write cannot finish before it.
DELAYED_WRITES = """
import itertools, sys, time
import memtui.cache
import memtui.cache.fileformat as fileformat
fileformat._PIECE = {piece}
real_store = fileformat._store_piece
real_write = fileformat.write_cache_file
counter = itertools.count(1)
told = []

def stopped():
    return bool(told) and told[0]()

def delayed(*args, **kwargs):
    calls = next(counter)
    {wait}
    return real_store(*args, **kwargs)

def write(path, arrays, meta, stop):
    told.append(stop)
    return real_write(path, arrays, meta, stop=stop)

fileformat._store_piece = delayed
fileformat.write_cache_file = write  # the cache imports it where it writes
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""
# A stalled writer outlasts the wait for it (ModelCache.abandon: 2 s), which then removes its
# file; the stalled cases wait half a second instead, the same path in less time.
SHORT_ABANDON_WAIT = """
import memtui.cache.store as store
real_abandon = store.ModelCache.abandon
store.ModelCache.abandon = lambda self, wait_s=0.5: real_abandon(self, wait_s)
"""
# the first piece of data waits two minutes
STALLED_WRITE = SHORT_ABANDON_WAIT + DELAYED_WRITES.format(piece=8 << 20, wait="time.sleep(120 if calls == 1 else 0)")
SLOW_PIECES = DELAYED_WRITES.format(
    piece=256, wait="while calls > 1 and not stopped() and time.sleep(0.01) is None: pass")
# the first piece stalls, and the Ctrl-C comes to the writer's thread, not the main one (the
# kernel gives a process's signal to any thread; under load the main thread waited forever)
STALLED_SIGNALLED_IN_WRITER = SHORT_ABANDON_WAIT + DELAYED_WRITES.format(
    piece=8 << 20, wait="calls == 1 and __import__('signal').pthread_kill(__import__('threading').get_ident(), 2); "
                        "time.sleep(120 if calls == 1 else 0)")


def partial_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.partial")) if folder.exists() else []


@pytest.mark.parametrize("script, signame",
                         [(STALLED_WRITE, "SIGINT"), (SLOW_PIECES, "SIGTERM"), (SLOW_PIECES, "SIGHUP"),
                          (STALLED_SIGNALLED_IN_WRITER, "")],
                         ids=["write-stalls-SIGINT", "slow-pieces-SIGTERM", "slow-pieces-SIGHUP",
                              "write-stalls-SIGINT-to-the-writer"])
def test_a_signal_during_the_cache_write_ends_in_one_line(tmp_path, script, signame):
    snapshot = write_tiny_snapshot(tmp_path)
    cache_dir = tmp_path / "cache"
    folder = Path(ModelCache(str(cache_dir)).folder)
    process = subprocess.Popen([sys.executable, "-c", script, "info", "--cache-dir", str(cache_dir), str(snapshot)],
                               cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while not partial_files(folder):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the cache write never started"
        time.sleep(0.005)
    signum = getattr(signal, signame or "SIGINT")
    sent = time.monotonic()
    if signame:  # else the script signals its writer's thread itself
        process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    took = time.monotonic() - sent
    lines = err.decode().strip().splitlines()
    assert process.returncode == 128 + signum, err
    assert len(lines) == 1 and lines[0].startswith("memtui: ") and "Traceback" not in lines[0], lines
    assert partial_files(cache_dir) == []
    assert not list(folder.glob("*.mtc"))  # abandoned, not finished
    assert took < 5  # the writer is given 2 s, then its file is removed under it

    again = subprocess.run([sys.executable, "-m", "memtui", "info", "--cache-dir", str(cache_dir), str(snapshot)],
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, timeout=60)
    assert again.returncode == 0 and again.stderr == b""  # the next run writes the cache as if nothing happened
    assert ModelCache(str(cache_dir)).load(snapshot) is not None


@pytest.fixture(scope="module")
def medium_snapshot(tmp_path_factory) -> Path:
    """50,000 events tiled from the tiny snapshot: a cold open takes about half a second,
    long enough to land in the decoding, the model, the cache write or the output."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from make_big import write_big
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from memtui.load.read import read_snapshot

    folder = tmp_path_factory.mktemp("medium")
    out = folder / "medium.pickle"
    write_big(read_snapshot(write_tiny_snapshot(folder)), 50_000, out)
    return out


@pytest.mark.parametrize("command, signame", [("info", "INT"), ("export", "TERM")])
def test_a_signal_at_a_random_moment_ends_cleanly(tmp_path, medium_snapshot, command, signame):
    delay = random.Random(f"{command}-{signame}").uniform(0.2, 1.0)
    outcome = run_once(command, medium_snapshot, signame, delay, tmp_path / "run")
    assert outcome.clean, outcome


@pytest.mark.slow  # each case times a whole run first, then signals one at a moment within it
@pytest.mark.parametrize("signame", ["INT", "TERM"])
@pytest.mark.parametrize("command", ["info", "export", "convert", "explore"])
def test_a_signal_at_any_moment_of_each_command_ends_cleanly(tmp_path, medium_snapshot, command, signame):
    rng = random.Random(f"{command}-{signame}")
    duration = measure_duration(command, medium_snapshot, tmp_path / "measure")
    for _ in range(3):
        outcome = run_once(command, medium_snapshot, signame, rng.uniform(0.1, duration), tmp_path / "run")
        assert outcome.clean, outcome
