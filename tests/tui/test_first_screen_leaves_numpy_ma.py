"""The explorer's first screen, opened from the cache as a warm open is, never imports
numpy.ma, nor do the keys that move the cursor next: np.unique and np.isin import it (15-40
ms on the thread that draws), so the views that ran them there (the plot's annotation marks,
the actions that carry a stack, the state near the last one) mark a table or sort instead.
Nor does it import the filter language or the categories: they come with the keys that use
them (35-45 ms of the explorer's start)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SAMPLE = Path(__file__).parents[2] / "sample_snapshots" / "oom_training.pickle.xz"

OPEN_TO_THE_FIRST_SCREEN = textwrap.dedent("""
    import asyncio, sys
    from memtui.cache.store import ModelCache
    from memtui.tui.app import MemtuiApp
    from memtui.tui.screens.main import MainScreen

    LATER = ("memtui.query", "memtui.analysis.breakdown", "memtui.analysis.categories",
             "memtui.tui.widgets.breakdown_pane")

    async def main(path, folder):
        app = MemtuiApp(path, cache=ModelCache(folder), show_source=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(500):
                if isinstance(app.screen, MainScreen):
                    break
                await pilot.pause(0.02)
            await pilot.pause(0.3)
            print(type(app.screen).__name__, "numpy.ma" in sys.modules)
            print(*(name in sys.modules for name in LATER))
            await pilot.press("up", "up", "pageup", "up")
            await pilot.pause(0.3)
            print("numpy.ma" in sys.modules)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


def test_a_warm_first_screen_never_imports_numpy_ma(tmp_path):
    from memtui.cache.store import ModelCache
    from memtui.open import open_snapshot

    cache = ModelCache(str(tmp_path / "cache"))
    open_snapshot(SAMPLE, cache=cache)  # the model kept, as a first open leaves it
    cache.wait()
    run = [sys.executable, "-c", OPEN_TO_THE_FIRST_SCREEN, str(SAMPLE), cache.root]
    shown = subprocess.run(run, check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert shown == ["MainScreen", "False"] + ["False"] * 4 + ["False"]
