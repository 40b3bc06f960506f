"""memtui watch as a person runs it: the job in one tmux session, the watcher in another.

Killing the watcher, the job or the watcher's terminal at any moment leaves no process
behind, and the job goes on unharmed when its watcher goes. Skipped without tmux.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from memtui.live.client import read_status
from memtui.live.runtime import list_jobs
from tests.conftest import ROOT, terminal_env

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
_SERVERS = itertools.count()
SNAPSHOT = ROOT / "sample_snapshots" / "oom_training.pickle.xz"


class Session:
    def __init__(self, name: str, command: str, env: dict, width: int = 80, height: int = 24) -> None:
        self.name = name
        # A server of its own: tests on other workers end theirs at any moment, and a new-session
        # that meets a server on its way out fails.
        self.server = ["-L", f"memtui-test-{os.getpid()}-{next(_SERVERS)}"]
        # The variables go on the command line: a tmux server started earlier keeps its own environment.
        assign = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("PYTHONPATH", "MEMTUI_RUNTIME_DIR"))
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                  f"env {assign} {command}; echo EXIT=$?; sleep 60", check=True, cwd=ROOT, env=env)
        self.shell = int(self.tmux("display", "-p", "-t", name, "#{pane_pid}", capture_output=True, text=True,
                                   check=True).stdout)

    def tmux(self, *args: str, **options) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, *self.server, *args], **options)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys, check=True)

    def wait_for(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if re.search(pattern, text, re.M):
                return text
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} did not appear within {timeout}s; screen:\n{self.screen()}")

    def program(self) -> int:
        """The pid of the command the pane's shell runs."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = children(self.shell)
            if kids:
                return kids[0]
            time.sleep(0.05)
        raise AssertionError("the pane runs nothing")

    def close(self) -> None:
        self.tmux("kill-server", capture_output=True)


def children(pid: int) -> list[int]:
    done = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie is gone for our purpose: it runs nothing and its parent will reap it
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def live(monkeypatch):
    folder = tempfile.mkdtemp(prefix="mtt", dir="/tmp")
    monkeypatch.setenv("MEMTUI_RUNTIME_DIR", folder)
    env = terminal_env(PYTHONPATH=str(ROOT), MEMTUI_RUNTIME_DIR=folder)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    job = Session(f"memtui-job-{tag}", f"{sys.executable} -m memtui.live.replay_source {SNAPSHOT} --rate 200 "
                  "--loop --ranks 2", env, 100, 20)
    job.wait_for("^serving")
    sessions = [job]

    def watcher(width: int = 80, height: int = 24, out: str | None = None) -> Session:
        session = Session(f"memtui-watch-{tag}", f"{sys.executable} -m memtui watch --out {out or folder}", env,
                          width, height)
        sessions.append(session)
        return session

    yield job, watcher, folder
    for session in sessions:
        session.close()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("size", [(80, 24), pytest.param((200, 60), marks=pytest.mark.slow)])
def test_killing_the_job_leaves_the_watcher_with_the_last_state(live, size, tmp_path):
    job, watcher, _ = live
    view = watcher(*size, out=str(tmp_path))
    view.wait_for(r"^ LIVE · oom_training.* [1-9][\d,]* ev ")
    view.wait_for(r"Top call sites now")
    view.wait_for(r"▶ rank")
    view.wait_for(r"Events \(tail\)")
    view.wait_for(r"⣿")  # the timeline has grown
    server = job.program()
    os.kill(server, signal.SIGKILL)
    view.wait_for(r"ENDED \(the job went away\)")
    view.keys("s")
    view.wait_for(r"written .*\.last-\d+\.pickle")
    assert any(".last-" in name for name in os.listdir(tmp_path))
    watching = view.program()
    view.keys("q")
    view.wait_for("^EXIT=0")
    assert gone(watching) and list_jobs() == []


def test_killing_the_watcher_leaves_the_job_serving(live):
    job, watcher, _ = live
    view = watcher()
    view.wait_for(r"^ LIVE")
    watching = view.program()
    os.kill(watching, signal.SIGKILL)
    assert gone(watching)
    jobs = list_jobs()
    assert len(jobs) == 2
    status = read_status(jobs[0])  # the job still answers, at once
    assert status["devices"]
    # the terminal was left in the watcher's modes; the next program in it still runs
    view.wait_for("^EXIT=137")


def test_closing_the_watchers_terminal_ends_it(live):
    _, watcher, _ = live
    view = watcher()
    view.wait_for(r"^ LIVE")
    watching = view.program()
    view.close()  # the terminal goes away: SIGHUP
    assert gone(watching)
    assert len(list_jobs()) == 2  # the job is unharmed


LOOP = """
import time
import torch
import memtui.record
while True:
    torch.empty(1 << 20)
    memtui.record.step()
    time.sleep(0.05)
"""


# About 13 s on a shared 2-core machine; the job side is tested in tests/system/test_live_job.py and
# the freeze in tests/tui/test_watch_app.py, so this whole-terminal run is a slow case.
@pytest.mark.slow
def test_a_job_run_with_live_is_watched_frozen_and_outlived(tmp_path, monkeypatch):
    """The job side itself (memtui run --live, against the stand-in torch of the recording tests)."""
    from test_live_job import COUNTERS
    from test_record import FAKE_TORCH

    package = tmp_path / "faketorch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TORCH + COUNTERS)
    (tmp_path / "loop.py").write_text(LOOP)
    folder = tempfile.mkdtemp(prefix="mtr", dir="/tmp")
    monkeypatch.setenv("MEMTUI_RUNTIME_DIR", folder)
    env = terminal_env(PYTHONPATH=f"{package.parent}{os.pathsep}{ROOT}", MEMTUI_RUNTIME_DIR=folder)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    job = Session(f"memtui-runjob-{tag}", f"{sys.executable} -m memtui run --live --out {tmp_path} "
                  f"{tmp_path / 'loop.py'}", env, 100, 20)
    view = None
    try:
        job.wait_for("serving CUDA memory at")
        view = Session(f"memtui-runwatch-{tag}", f"{sys.executable} -m memtui watch --out {tmp_path}", env)
        view.wait_for(r"^ LIVE · loop\.py.* [1-9][\d,]* ev ")  # the script's name, not memtui's
        view.keys("f")
        view.wait_for(r"loop\.pid\d+\.frozen-\d+\.pickle")
        assert any(".frozen-" in name for name in os.listdir(tmp_path))
        view.keys("BSpace")
        view.wait_for(r"^ LIVE")
        running = job.program()
        os.kill(running, signal.SIGKILL)
        view.wait_for(r"ENDED \(the job went away\)")
        watching = view.program()
        view.keys("q")
        view.wait_for("^EXIT=0")
        assert gone(watching) and gone(running) and list_jobs() == []
    finally:
        for session in (job, view):
            if session is not None:
                session.close()
        shutil.rmtree(folder, ignore_errors=True)
