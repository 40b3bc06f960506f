"""The explorer's screen (MainScreen and its 30-odd modules, 60-90 ms) is imported while the
loading screen waits for the open, not after the open has finished."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SAMPLE = Path(__file__).parents[2] / "sample_snapshots" / "oom_training.pickle.xz"

WHILE_LOADING = textwrap.dedent("""
    import asyncio, sys, threading
    from memtui.open import open_snapshot
    from memtui.tui.app import MemtuiApp

    go = threading.Event()

    def slow_open(progress):
        go.wait(30)
        return open_snapshot(sys.argv[1])

    async def main():
        app = MemtuiApp(slow_open, show_source=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                if type(app.screen).__name__ == "LoadingScreen":
                    break
                await pilot.pause(0.02)
            await pilot.pause(0.3)
            print(type(app.screen).__name__, "memtui.tui.screens.main" in sys.modules)
            go.set()
            for _ in range(500):
                if type(app.screen).__name__ == "MainScreen":
                    break
                await pilot.pause(0.02)
            print(type(app.screen).__name__)

    asyncio.run(main())
""")


def test_the_explorer_is_imported_while_the_open_runs():
    shown = subprocess.run([sys.executable, "-c", WHILE_LOADING, str(SAMPLE)], check=True, capture_output=True,
                           text=True, timeout=120).stdout.split()
    assert shown == ["LoadingScreen", "True", "MainScreen"]
