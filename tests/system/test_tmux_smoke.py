"""The real app in a real terminal: tmux at 120x40 on the 1,000,000-event snapshot.

It must open, jump to the last and first events, and find an allocation by its
address_n. Skipped when tmux or the big snapshot is not available. Prints the open time
and key latencies it saw (run with -s to read them).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, terminal_env

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
_SERVERS = itertools.count()
ROW = re.compile(r"^▶\s*([\d,]+)\s+\S+\s+(\w+)\s+([0-9a-f]+_\d+)?", re.M)


class Tmux:
    def __init__(self, command: str, width: int = 120, height: int = 40) -> None:
        self.name = f"memtui-smoke-{os.getpid()}"
        # A server of its own: tests on other workers end theirs at any moment, and a new-session
        # that meets a server on its way out fails.
        self.server = ["-L", f"memtui-test-{os.getpid()}-{next(_SERVERS)}"]
        env = terminal_env(PYTHONPATH=str(ROOT))
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                  f"{command}; echo EXIT=$?; sleep 60", check=True, cwd=ROOT, env=env)

    def tmux(self, *args: str, **options) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, *self.server, *args], **options)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, capture_output=True, text=True, check=True).stdout

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", self.name, *(["-l"] if literal else []), *keys, check=True)

    def wait_for(self, pattern: str, timeout: float) -> tuple[str, float]:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            text = self.screen()
            if re.search(pattern, text, re.M):
                return text, time.monotonic() - start
            time.sleep(0.02)
        raise AssertionError(f"{pattern!r} did not appear within {timeout}s; screen:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server", capture_output=True)


def cursor_row(text: str) -> tuple[int, str, str]:
    m = ROW.search(text)
    assert m, text
    return int(m.group(1).replace(",", "")), m.group(2), m.group(3) or ""


def test_big_trace_under_tmux(big_trace):
    tmux = Tmux(f"{sys.executable} -m memtui {big_trace}")
    try:
        _, opened = tmux.wait_for(r"^─Events", timeout=180)
        text, _ = tmux.wait_for(r"^▶", timeout=10)
        assert cursor_row(text)[0] == 999_999  # the explorer opens on the last event

        tmux.keys("Home")
        text, home = tmux.wait_for(r"^▶\s+0 ", timeout=10)
        tmux.keys("End")
        text, end = tmux.wait_for(r"^▶999,999 ", timeout=10)
        tmux.keys("PageUp")
        text, page = tmux.wait_for(r"^▶999,9[0-8]\d ", timeout=10)

        # An address_n from a row on screen, searched from the top of the trace.
        names = re.findall(r"^\s+[\d,]+\s+\S+\s+free_completed\s+([0-9a-f]+_\d+)", text, re.M)
        assert names, text
        target = names[0]
        tmux.keys("Home")
        tmux.wait_for(r"^▶\s+0 ", timeout=10)
        tmux.keys("/")
        tmux.wait_for(r"address_n \(", timeout=10)  # the search bar's placeholder
        tmux.keys(target, literal=True)
        tmux.keys("Enter")
        text, found = tmux.wait_for(rf"^▶.*\balloc\s+{target}\b", timeout=30)
        index, action, name = cursor_row(text)
        assert (action, name) == ("alloc", target) and index > 990_000

        tmux.keys("/")
        tmux.wait_for(r"address_n \(", timeout=10)
        tmux.keys("7f0000000000_0", literal=True)
        tmux.keys("Enter")
        tmux.wait_for(r"not found", timeout=30)

        tmux.keys("q")
        tmux.wait_for(r"^EXIT=0$", timeout=30)
        print(f"\nopen {opened:.1f}s, Home {home * 1000:.0f} ms, End {end * 1000:.0f} ms, "
              f"PgUp {page * 1000:.0f} ms, search {found * 1000:.0f} ms (tmux polling included)")
    finally:
        tmux.close()
