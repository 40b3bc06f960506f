"""The real explorer in a pseudo-terminal: signals and crashes leave the terminal usable.

SIGTERM, SIGHUP (what an SSH connection dropping sends) and SIGINT sent to a running
``memtui SNAP`` must end it through the normal exit: the output ends by leaving the
alternate screen and showing the cursor, the terminal is back in line mode with echo,
and the exit status is 128 + the signal, with no traceback. That holds even when the
event loop is wedged and cannot run the exit: the process still ends within the grace
period, and a second signal of any kind ends it at once. A crash (a fault injected into
the app) prints one line naming a short report under the cache folder.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from memtui.tui.lifecycle import EXIT_GRACE
from tests.conftest import ROOT
from tests.fixtures.interrupt_runs import default_signals
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

LEAVE_ALT_SCREEN = b"\x1b[?1049l"
SHOW_CURSOR = b"\x1b[?25h"

CRASHING_APP = """
import sys
from memtui.tui.screens.main import MainScreen

def fault(self):
    raise RuntimeError("injected fault")

MainScreen.on_mount = fault
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""

WEDGED_APP = """
import os, sys, threading
from memtui.tui.screens.main import MainScreen

def wedge(self):
    os.write(2, b"WEDGED")
    threading.Event().wait()  # the event loop never runs again

MainScreen.on_mount = wedge
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""


class PtyRun:
    """A command on a 100x30 pseudo-terminal, its output collected."""

    def __init__(self, command: list[str], cache_home) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache_home))
        env.pop("NO_COLOR", None)
        self.process = subprocess.Popen(command, stdin=self.slave, stdout=self.slave, stderr=self.slave, env=env,
                                        cwd=ROOT, start_new_session=True, preexec_fn=default_signals)
        self.output = b""

    def read_until(self, wanted: bytes, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.output:
            assert time.monotonic() < deadline, f"{wanted!r} never came: {self.output[-500:]!r}"
            self._read(0.05)

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            assert time.monotonic() < deadline, f"still running: {self.output[-500:]!r}"
            self._read(0.05)
        while self._read(0.2):
            pass
        return self.process.returncode

    def line_mode_restored(self) -> bool:
        lflag = termios.tcgetattr(self.slave)[3]
        return bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)
        os.close(self.slave)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:
            return False
        self.output += data
        return bool(data)


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (Linux; elsewhere, wait a little)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            mask = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    except OSError:
        time.sleep(0.5)
        return False
    return bool(int(mask, 16) >> (signum - 1) & 1)


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_snapshot(tmp_path)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_restores_the_terminal(tmp_path, tiny, signum):
    run = PtyRun([sys.executable, "-m", "memtui", str(tiny)], tmp_path / "cache-home")
    try:
        run.read_until(b"Events")  # the main screen is drawn
        time.sleep(0.2)
        drawn = len(run.output)
        os.kill(run.process.pid, signum)
        code = run.wait()
        after = run.output[drawn:]
        assert code == 128 + signum
        assert LEAVE_ALT_SCREEN in after and SHOW_CURSOR in after
        assert run.line_mode_restored()
        assert b"Traceback" not in run.output
    finally:
        run.close()


def test_a_crash_prints_one_line_and_writes_a_report(tmp_path, tiny):
    cache_home = tmp_path / "cache-home"
    run = PtyRun([sys.executable, "-c", CRASHING_APP, str(tiny)], cache_home)
    try:
        code = run.wait(timeout=60)
        assert code == 70
        assert run.line_mode_restored()
        assert b"Traceback" not in run.output
        restored = run.output.rindex(LEAVE_ALT_SCREEN)
        text = run.output[restored:].split(b"\x1b[?1006l")[-1].decode()
        lines = text.strip().splitlines()
        assert len(lines) == 1 and "internal error (RuntimeError: injected fault)" in lines[0], text
        report = lines[0].rsplit(" ", 1)[-1]
        assert report.startswith(str(cache_home / "memtui" / "crashes"))
        content = open(report).read()
        assert "RuntimeError: injected fault" in content and "def fault" not in content
        assert len(content.splitlines()) < 150
    finally:
        run.close()


# The wedged app's grace, shorter than EXIT_GRACE: the test waits for all of it, and the
# watchdog reads the module's value when the signal comes.
SHORT_GRACE = 1.0


def test_a_signal_ends_an_app_whose_event_loop_is_wedged(tmp_path, tiny):
    app = f"import memtui.tui.lifecycle as lifecycle\nlifecycle.EXIT_GRACE = {SHORT_GRACE}\n{WEDGED_APP}"
    run = PtyRun([sys.executable, "-c", app, str(tiny)], tmp_path / "cache-home")
    try:
        run.read_until(b"WEDGED")
        sent = time.monotonic()
        os.kill(run.process.pid, signal.SIGTERM)
        code = run.wait(timeout=SHORT_GRACE + 10)
        assert code == 128 + signal.SIGTERM
        assert time.monotonic() - sent < SHORT_GRACE + 5
        assert LEAVE_ALT_SCREEN in run.output.split(b"WEDGED")[-1]
        assert run.line_mode_restored()
        assert b"Traceback" not in run.output
    finally:
        run.close()


def test_a_second_signal_of_another_kind_acts_at_once(tmp_path, tiny):
    run = PtyRun([sys.executable, "-c", WEDGED_APP, str(tiny)], tmp_path / "cache-home")
    try:
        run.read_until(b"WEDGED")
        os.kill(run.process.pid, signal.SIGHUP)
        deadline = time.monotonic() + 15  # generous: on a loaded machine the handler runs late
        while catches(run.process.pid, signal.SIGTERM):  # until the first one's handler has run
            assert time.monotonic() < deadline, "SIGTERM is still caught after SIGHUP"
            time.sleep(0.02)
        assert run.process.poll() is None
        os.kill(run.process.pid, signal.SIGTERM)
        assert run.wait(timeout=EXIT_GRACE / 2) == -signal.SIGTERM
    finally:
        run.close()
