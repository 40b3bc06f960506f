"""The explorer writes the model cache once its first screen is drawn, not while it prepares it."""

from __future__ import annotations

import os

from memtui.cache.store import ModelCache
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.main import MainScreen
from tests.fixtures.tiny_snapshot import write_tiny_snapshot
from tests.tui.helpers import screens_writes_start_on


async def test_the_cache_is_written_after_the_first_screen(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"))
    started_on = screens_writes_start_on(cache, lambda: app)
    app = MemtuiApp(snapshot, cache=cache)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if isinstance(app.screen, MainScreen) and started_on:
                break
            await pilot.pause(0.05)
    cache.wait()
    # the model, the explorer's curves and, once the worker has built it, the replay index
    assert started_on[:2] == ["MainScreen", "MainScreen"] and set(started_on) <= {"MainScreen", "ended"}
    names = sorted(os.listdir(cache.folder))
    assert sum(name.endswith(".mtc") for name in names) == 1 and sum(".curves" in name for name in names) == 1
