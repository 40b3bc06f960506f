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


async def test_the_work_after_the_first_screen_waits_for_a_pause_in_the_keys(tmp_path):
    # The index and the cache writes ran beside the first keys typed (40-90 ms a key at 10M).
    from memtui.cache.store import ModelCache
    from memtui.tui.app import MemtuiApp
    from memtui.tui.keys_pause import KEYS_PAUSE_S
    from tests.tui.helpers import loaded

    snapshot = loaded(str(SAMPLE))
    cache = ModelCache(str(tmp_path / "cache"))
    app = MemtuiApp(lambda progress: snapshot, cache=cache, show_source=False)
    writes = []
    cache.release_writes = lambda _release=cache.release_writes: (writes.append(True), _release())[1]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        view = screen.current_view
        for _ in range(8):  # a key every 0.1 s: never a pause of KEYS_PAUSE_S
            await pilot.press("up")
            await pilot.pause(KEYS_PAUSE_S / 3)
            assert not view.replayer.indexed and not writes
        await pilot.pause(KEYS_PAUSE_S * 2)
        await settle(app, pilot)
        assert view.replayer.indexed and writes
