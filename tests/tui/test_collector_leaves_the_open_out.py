"""Once the app's first explorer has drawn its first screen, what the open made is left out of
the cyclic collector's passes (gc.freeze): a full pass over it took 46 ms at ten million
events, and a key typed meanwhile waited for it. An explorer that goes (replaced, or popped
back to a list) lets it back in, and is collected like any garbage; later ones are not frozen."""

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


def _first_app():
    """An app on the tiny snapshot, made with nothing frozen: unfrozen before the app starts,
    since once it runs its first screen may be drawn, and frozen, at any moment."""
    gc.unfreeze()
    return make_app(tiny_path())


async def _first_explorer(app, pilot):
    """The app's first explorer, up, its workers done, and what it made frozen."""
    screen = await ready(app, pilot)
    await settle(app, pilot)
    assert gc.get_freeze_count() > 0
    return screen


async def test_an_explorer_replaced_by_another_is_collected():
    import weakref

    app = _first_app()
    async with app.run_test(size=(120, 40)) as pilot:
        first = await _first_explorer(app, pilot)
        gone = weakref.ref(first)
        snapshot = first.snapshot
        app.open_file(lambda progress: snapshot)
        for _ in range(200):
            if app.screen is not first and type(app.screen).__name__ == "MainScreen":
                break
            await pilot.pause(0.02)
        del first
        await settle(app, pilot)
        await pilot.pause(0.1)
        assert gc.get_freeze_count() == 0  # a later explorer is left to the collector ...
        gc.collect()
        assert gone() is None  # ... and the one it replaced is collected, not kept frozen


async def test_an_explorer_popped_goes_back_to_the_collector():
    app = _first_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _first_explorer(app, pilot)
        await app.switch_screen(type(app.screen_stack[0])())  # as the rank list's q or the live view's Esc
        await pilot.pause()
        assert screen.is_attached is False and gc.get_freeze_count() == 0
