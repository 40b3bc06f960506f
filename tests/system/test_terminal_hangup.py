"""A terminal that goes away while the explorer repaints must not leave the explorer running.

``tmux kill-session`` does to the explorer what a dropped SSH connection does: its terminal
hangs up (every write fails, SIGHUP and SIGCONT arrive) while it is still busy with the
keys just sent. Each cycle opens a small snapshot in a private tmux server, sends a burst
of keys and kills the session in the same tmux command, then requires the process to be
gone within a few seconds; every other cycle also sends SIGTERM at once, as a supervisor
would, which must not be swallowed. Skipped when tmux is not installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtui.tui.lifecycle import EXIT_GRACE
from tests.conftest import ROOT, SAMPLES, SHARED, terminal_env
from tests.fixtures.snapshot_strategies import LONG_RUN
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

# Each snapshot once by default (every other cycle with SIGTERM too): more cycles only
# repeated the first ones, the same file with the same signals. A long run
# (MEMTUI_FUZZ_EXAMPLES) hangs up more often.
CYCLES = 12 if LONG_RUN else None
GONE_WITHIN = EXIT_GRACE + 3.0  # seconds after the hang-up
BURST = ["k"] * 40 + ["PageUp", "PageDown"] * 10 + ["j"] * 40
LARGER = SHARED / "long_run_wrap.pickle"  # 2 MB, 100k events: used when present


class TmuxServer:
    """A tmux server of this test's own, so that no other session is touched."""

    def __init__(self, folder: Path) -> None:
        socket = str(folder / "tmux.socket")  # removed with the folder
        self.where = ["-S", socket] if len(socket) < 100 else ["-L", f"memtui-hangup-{os.getpid()}"]
        self.env = terminal_env(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(folder / "cache-home"),
                                 TERM="xterm-256color")
        self.env.pop("TMUX", None)

    def __call__(self, *args: str, check: bool = True) -> str:
        return subprocess.run([TMUX, *self.where, *args], capture_output=True, text=True, check=check,
                              env=self.env, cwd=ROOT, timeout=30).stdout

    def open(self, name: str, snapshot: Path) -> int:
        """Start the explorer on ``snapshot`` as the session's process; its pid, once drawn."""
        for attempt in range(5):
            # After the last session is killed the tmux server exits; a new-session that
            # reaches it while it is going away fails, and the next one starts a fresh server.
            try:
                self("new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                     f"exec {sys.executable} -m memtui {snapshot}")
                break
            except subprocess.CalledProcessError:
                if attempt == 4:
                    raise
                time.sleep(0.2)
        pid = int(self("list-panes", "-t", name, "-F", "#{pane_pid}"))
        deadline = time.monotonic() + 60
        while "Events" not in self("capture-pane", "-p", "-t", name, check=False):
            assert running(pid), f"the explorer on {snapshot.name} ended before drawing"
            assert time.monotonic() < deadline, f"the explorer on {snapshot.name} was never drawn"
            time.sleep(0.02)
        return pid

    def close(self) -> None:
        self("kill-server", check=False)


def running(pid: int) -> bool:
    """Whether ``pid`` is alive (where /proc tells, a zombie waiting for its reaper is not)."""
    if os.path.isdir("/proc/self"):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, timeout: float) -> float | None:
    """Seconds until ``pid`` was gone, or None if it still runs after ``timeout``."""
    start = time.monotonic()
    while running(pid):
        if time.monotonic() - start > timeout:
            return None
        time.sleep(0.01)
    return time.monotonic() - start


@pytest.fixture
def snapshots(tmp_path) -> list[Path]:
    names = ("multistream.pickle.xz", "expandable_segments.pickle.xz", "train_linear_adam.pickle.xz")
    files = [write_tiny_snapshot(tmp_path), *(SAMPLES / name for name in names)]
    if LARGER.exists():
        files.append(LARGER)
    return files


def test_killing_the_terminal_during_repaints_ends_the_explorer(tmp_path, snapshots):
    tmux = TmuxServer(tmp_path)
    times: list[float] = []
    stuck: list[str] = []
    cycles = CYCLES or len(snapshots)
    try:
        for cycle in range(cycles):
            snapshot = snapshots[cycle % len(snapshots)]
            name = f"hangup{cycle}"
            pid = tmux.open(name, snapshot)
            # The keys and the hang-up in one tmux command: the explorer is still handling
            # them, and repainting, when its terminal goes away.
            tmux("send-keys", "-t", name, *BURST, ";", "kill-session", "-t", name)
            if cycle % 2:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            gone = wait_gone(pid, GONE_WITHIN)
            if gone is None:
                stuck.append(f"cycle {cycle} ({snapshot.name}{', SIGTERM' if cycle % 2 else ''})")
                os.kill(pid, signal.SIGKILL)
                break  # one is enough to fail; the others would each wait the whole time
            times.append(gone)
    finally:
        tmux.close()
    assert not stuck, f"still running {GONE_WITHIN:.0f}s after the terminal was killed: {stuck}"
    print(f"{cycles} hang-ups, all gone; slowest exit {max(times):.2f}s")
