"""The explorer as a person meets it: in a real terminal (tmux), from the command's start.

``first_screen(argv)`` starts the explorer in a detached tmux session of the given size and
polls the pane until its first full screen shows (the segment map, the event log and the
stack pane, by words each draws), then presses keys one at a time, timing each until the
pane changes, and quits with ``q`` (the explorer finishes its cache write before it ends).
Nothing here runs without tmux; the benchmark says so instead.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time

# Words the first full screen draws: the map's header, the event log's title and its rows,
# the stack pane's title.
READY = (" blocks (", "Events", "Stack", "free_")
KEYS = ("Up",) * 5 + ("PageUp",) * 5 + ("k",) * 5


def available() -> bool:
    return shutil.which("tmux") is not None


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def first_screen(argv: list[str], env: dict, size: str = "120x40", timeout: float = 300) -> dict:
    """Seconds to the first full screen, the keys' latencies and the time to quit."""
    width, height = size.split("x")
    session = f"memtui-bench-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    command = " ".join(_quoted(a) for a in argv)
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}  # the pane's own size wins
    env.setdefault("TERM", "xterm-256color")
    started = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", width, "-y", height, command],
                   check=True, env=env)
    try:
        screen = _pane(session)
        while not all(word in screen for word in READY):
            if time.monotonic() - started > timeout:
                return {"error": f"no first full screen after {timeout:.0f} s: {screen.strip()[-160:]!r}"}
            time.sleep(0.005)
            screen = _pane(session)
        shown = time.monotonic() - started
        latencies = []
        for key in KEYS:
            before = _pane(session)
            sent = time.monotonic()
            subprocess.run(["tmux", "send-keys", "-t", session, key])
            while _pane(session) == before and time.monotonic() - sent < 5:
                time.sleep(0.002)
            latencies.append(time.monotonic() - sent)
            time.sleep(0.05)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"])
        quit_at = time.monotonic()
        while subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
            if time.monotonic() - quit_at > timeout:
                return {"error": "the explorer did not end after q"}
            time.sleep(0.02)
        latencies.sort()
        return {"screen_s": shown, "keys_p50_s": statistics.median(latencies),
                "keys_p95_s": latencies[max(0, round(0.95 * len(latencies)) - 1)],
                "quit_s": time.monotonic() - quit_at}
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def _quoted(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"
