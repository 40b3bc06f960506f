"""Shared pieces of the explorer tests: cached snapshots, an app that is ready to drive."""

from __future__ import annotations

import functools
from pathlib import Path

from memtui.model import Snapshot
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.main import MainScreen
from tests.conftest import SHARED
from tests.fixtures.opened import cached
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

OOM_REAL = SHARED / "oom_real.pickle"


@functools.cache
def tiny_path() -> Path:
    import tempfile

    return write_tiny_snapshot(Path(tempfile.mkdtemp(prefix="memtui-tiny-")))


def loaded(path: str) -> Snapshot:
    """Each file is read once per test session (the one cache, tests/fixtures/opened.py); the
    app gets the snapshot through a loader."""
    return cached(str(path))


def make_app(path: Path, **kwargs) -> MemtuiApp:
    snapshot = loaded(str(path))
    kwargs.setdefault("show_source", False)  # source files differ between machines
    app = MemtuiApp(lambda progress: snapshot, **kwargs)
    app.keys_pause_s = 0  # the index and the cache writes once the screen is drawn (no pause to wait for)
    return app


async def ready(app: MemtuiApp, pilot) -> MainScreen:
    """Wait until the main screen is up (the load runs in a worker)."""
    for _ in range(400):
        if isinstance(app.screen, MainScreen):
            await pilot.pause()
            return app.screen
        await pilot.pause(0.01)
    raise AssertionError(f"the main screen never appeared (screen: {app.screen!r}, error: {app.load_error})")


async def settle(app: MemtuiApp, pilot) -> None:
    """Let workers finish and their messages be handled."""
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def search(app: MemtuiApp, pilot, text: str, typed: bool = False) -> None:
    """``/`` then the query then Enter; ``typed`` presses every character (slower)."""
    from memtui.tui.widgets.search_bar import SearchBar

    if typed:
        await pilot.press("slash", *text, "enter")
    else:
        await pilot.press("slash")
        app.screen.query_one(SearchBar).value = text
        await pilot.press("enter")
    await settle(app, pilot)


def screens_writes_start_on(cache, app_of) -> list[str]:
    """The name of the app's screen as each of ``cache``'s background writes starts ("ended"
    for one after the app): ``app_of()`` gives the app, made after this is called."""
    started_on: list[str] = []
    real_start = cache._start_writer

    def noting_start(task):
        try:
            started_on.append(type(app_of().screen).__name__)
        except Exception:  # noqa: BLE001 - a write started once the app has ended (the index)
            started_on.append("ended")
        real_start(task)

    cache._start_writer = noting_start
    return started_on
