"""After the first screen, a worker makes what the first keys ask for: the time-travel index
and the actions that carry a stack (a pass over every event, asked by the inspector for the
first event without a stack)."""

from __future__ import annotations

from pathlib import Path

from tests.tui.helpers import make_app, ready, settle

SAMPLE = Path(__file__).parents[2] / "sample_snapshots" / "train_linear_adam.pickle.xz"


async def test_the_worker_after_the_first_screen_readies_the_first_keys():
    app = make_app(SAMPLE)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        view = screen.current_view
        assert view.replayer.indexed
        assert "_stacked_actions" in vars(view.device)


def test_the_explorer_writes_its_cache_after_the_answer():
    # Its writes run below the thread that draws (memtui.cores.run_after_the_answer).
    from memtui.cache.store import ModelCache
    from memtui.tui.app import MemtuiApp

    cache = ModelCache()
    assert not cache.writes_after_the_answer
    MemtuiApp("unused.pickle", cache=cache)
    assert cache.writes_after_the_answer
