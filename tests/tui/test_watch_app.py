"""The live view driven by Pilot against a recorded snapshot replayed through the real server."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path

import pytest

from memtui.live import replay_source
from memtui.live.replay_source import serve_replay
from memtui.live.runtime import list_jobs
from memtui.tui.screens.live import LiveScreen
from memtui.tui.screens.main import MainScreen
from memtui.tui.watch_app import WatchApp

OOM_FILE = Path(__file__).resolve().parents[2] / "sample_snapshots" / "oom_training.pickle.xz"


# The replay servers tick every 0.1 s (serve_replay's default), not faster: they run in this
# process, and Pilot's press waits for the process to go idle (up to a second, twice a key),
# which a server reading the trace every 20 ms never lets it do.
INTERVAL = 0.1


async def until(pilot, predicate, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        await pilot.pause(0.05)
    return predicate()


# A real server, a model rebuilt as the trace arrives, an OOM diagnosed and a frozen file
# opened in the explorer. The larger terminal adds nothing the tmux test at 200x60 does not
# check, so it is a slow case.
@pytest.mark.parametrize("size", [(80, 24), pytest.param((200, 60), marks=pytest.mark.slow)])
async def test_the_live_view_follows_the_job_freezes_and_keeps_the_last_state(live_dir, tmp_path, size):
    servers = [serve_replay(str(OOM_FILE), rate=3000, interval=INTERVAL, rank=r, job="j") for r in (0, 1)]
    try:
        app = WatchApp(list_jobs(), out_dir=str(tmp_path))
        async with app.run_test(size=size) as pilot:
            assert await until(pilot, lambda: isinstance(app.screen, LiveScreen))
            live = app.screen
            # the whole recording arrives, the OOM is explained, the event log shows the tail
            assert await until(pilot, lambda: live.view is not None and live.view.n_events == 719)
            assert await until(pilot, lambda: live.query_one("#oom").display)  # the headline at once
            # then the diagnosis in its place
            assert await until(pilot, lambda: "verdict" in str(live.query_one("#oom").render()))
            assert live.event_log.cursor_event == 718
            assert "▶ rank" in str(live.query_one("#ranks").render())
            # pause: the view holds still while updates keep arriving
            await pilot.press("p")
            assert live.paused and "PAUSED" in str(live.query_one("#live-header").render())
            await pilot.press("up", "up")
            assert live.event_log.cursor_event == 716
            await pilot.press("p")
            # freeze: a whole snapshot from the job, written, opened in the explorer
            await pilot.press("f")
            assert await until(pilot, lambda: isinstance(app.screen, MainScreen))
            frozen = [f for f in os.listdir(tmp_path) if ".frozen-" in f]
            assert len(frozen) == 1
            await pilot.press("backspace")
            assert await until(pilot, lambda: isinstance(app.screen, LiveScreen))
            # the job ends: the last state stays and can be saved
            for server in servers:
                server.stop()
            assert await until(pilot, lambda: "ENDED" in str(live.query_one("#live-header").render()))
            await pilot.press("s")
            assert await until(pilot, lambda: any(".last-" in f for f in os.listdir(tmp_path)))
            await pilot.press("q")
    finally:
        for server in servers:
            server.stop()
        await asyncio.sleep(0)


async def test_pause_says_so_at_once_not_at_the_next_tick(live_dir, tmp_path, monkeypatch):
    # With the redraw tick pushed out of reach, only the key itself can put PAUSED in the header.
    import memtui.tui.screens.live as live_screen

    monkeypatch.setattr(live_screen, "REDRAW", 3600.0)
    server = serve_replay(str(OOM_FILE), rate=3000, interval=INTERVAL, rank=0, job="j")
    try:
        app = WatchApp(list_jobs(), out_dir=str(tmp_path))
        async with app.run_test(size=(80, 24)) as pilot:
            assert await until(pilot, lambda: isinstance(app.screen, LiveScreen))
            live = app.screen
            assert await until(pilot, lambda: live.client is not None)
            await pilot.press("p")
            assert "PAUSED" in str(live.query_one("#live-header").render())
            await pilot.press("p")
            assert str(live.query_one("#live-header").render()).startswith("LIVE")
            await pilot.press("q")
    finally:
        server.stop()
        await asyncio.sleep(0)


class HeldClock:
    """A replay's clock that stands still until released, then runs: nothing of the recording
    (its OOM the last entry) is revealed before the test lets it go."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.released: float | None = None

    def __call__(self) -> float:
        return self.start if self.released is None else self.start + time.monotonic() - self.released

    def release(self) -> None:
        self.released = time.monotonic()


async def test_an_oom_that_comes_while_the_view_is_paused_is_said_at_once(live_dir, tmp_path, monkeypatch):
    # The job's clock is held until the view is paused, so the OOM comes after the pause
    # however long the app takes to start; then the recording plays in about a second.
    clock = HeldClock()
    monkeypatch.setattr(replay_source, "ReplayProbe", functools.partial(replay_source.ReplayProbe, clock=clock))
    server = serve_replay(str(OOM_FILE), rate=600, interval=INTERVAL, job="slow")
    try:
        app = WatchApp(list_jobs(), out_dir=str(tmp_path))
        async with app.run_test(size=(80, 24)) as pilot:
            assert await until(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.client is not None)
            live = app.screen
            await pilot.press("p")
            assert live.paused and not live.query_one("#oom").display
            assert not live.client.state.ooms
            clock.release()
            assert await until(pilot, lambda: bool(live.client.state.ooms), timeout=20)
            assert await until(pilot, lambda: live.query_one("#oom").display, timeout=2)
            assert "OUT OF MEMORY" in str(live.query_one("#oom").render())
            assert live.paused
    finally:
        server.stop()
