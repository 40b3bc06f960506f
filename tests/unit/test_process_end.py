"""How the ``memtui`` command ends: without the interpreter's teardown once nothing is left
to do, and as usual when something still is."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from memtui import process_end as entry
from memtui.cache.store import ModelCache
from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import write_tiny_snapshot


class Ended(Exception):
    pass


@pytest.fixture
def ends(monkeypatch):
    """What ``end`` did: the exit handlers run, and the code os._exit was given."""
    seen: dict = {"handlers": 0}

    def fake_exit(code):
        seen["exit"] = code
        raise Ended

    monkeypatch.setattr(entry.os, "_exit", fake_exit)
    monkeypatch.setattr(entry.atexit, "_run_exitfuncs", lambda: seen.__setitem__("handlers", seen["handlers"] + 1))
    return seen


def test_with_nothing_left_to_do_the_process_ends_after_the_exit_handlers(ends):
    with pytest.raises(Ended):
        entry.end(3)
    assert ends == {"handlers": 1, "exit": 3}


def test_a_thread_still_working_is_waited_for_as_usual(ends):
    release = threading.Event()
    worker = threading.Thread(target=release.wait)  # not a daemon
    worker.start()
    try:
        with pytest.raises(SystemExit) as ended:
            entry.end(4)
    finally:
        release.set()
        worker.join()
    assert ended.value.code == 4 and ends == {"handlers": 0}


def test_output_that_cannot_be_flushed_ends_as_usual(ends, monkeypatch):
    class Closed:
        def flush(self):
            raise BrokenPipeError

    monkeypatch.setattr(sys, "stdout", Closed())
    with pytest.raises(SystemExit) as ended:
        entry.end(0)
    assert ended.value.code == 0 and ends == {"handlers": 0}


def test_the_whole_command_writes_its_answer_and_its_cache_before_it_ends(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    cache_dir = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-m", "memtui", "info", "--cache-dir", str(cache_dir), str(snapshot)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.decode().startswith(snapshot.name) and done.stdout.endswith(b"\n")
    assert ModelCache(str(cache_dir)).load(snapshot) is not None  # written in the background, then waited for


def test_the_commands_that_run_a_script_or_serve_end_as_python_does():
    from memtui.cli import ends_as_python_does

    for argv in (["run", "train.py"], ["--no-cache", "run", "x.py"], ["--cache-dir", "d", "serve"], ["mcp"]):
        assert ends_as_python_does(argv), argv
    for argv in (["info", "s.pickle"], ["s.pickle"], [], ["--no-cache", "oom", "s.pickle"], ["--cache-dir"]):
        assert not ends_as_python_does(argv), argv
