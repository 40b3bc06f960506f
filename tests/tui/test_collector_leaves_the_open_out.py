"""Once the explorer's first screen is drawn, what the open made is left out of the cyclic
collector's passes (gc.freeze): a full pass over it took 46 ms at ten million events, and a
key typed meanwhile waited for it."""

from __future__ import annotations

import gc

from tests.tui.helpers import make_app, ready, settle, tiny_path


async def test_the_first_screen_freezes_what_the_open_made():
    gc.unfreeze()
    try:
        app = make_app(tiny_path())
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(app, pilot)
            await settle(app, pilot)
            assert gc.get_freeze_count() > 0
            shown = app.screen.snapshot
            assert gc.is_tracked(shown) and not any(o is shown for o in gc.get_objects())  # in no generation
    finally:
        gc.unfreeze()


async def test_opening_another_snapshot_lets_the_one_shown_back_in():
    gc.unfreeze()
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        first = await ready(app, pilot)
        await settle(app, pilot)
        assert gc.get_freeze_count() > 0
        snapshot = first.snapshot
        app.open_file(lambda progress: snapshot)
        assert gc.get_freeze_count() == 0  # the explorer it replaces can be collected
        for _ in range(200):
            if app.screen is not first and type(app.screen).__name__ == "MainScreen":
                break
            await pilot.pause(0.02)
        await settle(app, pilot)
        assert app.screen is not first and gc.get_freeze_count() > 0
