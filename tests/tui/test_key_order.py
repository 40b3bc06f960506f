"""Keys typed in a burst are never lost: not while the snapshot loads, not while the main
screen first appears, not while the search bar opens or closes.

A terminal delivers a burst (a paste, a fast typist, a script) as key events that all
reach the app before any of them is handled. Pilot's ``press`` waits for the app to go
idle after each key, so these tests post the events the way the terminal driver does:
all at once, with no pause in between.
"""

from __future__ import annotations

import asyncio

from textual import events
from textual.keys import _character_to_key

from memtui.model.address_n import format_address_n
from memtui.tui.screens.detail import DetailScreen
from memtui.tui.screens.main import MainScreen
from memtui.tui.widgets.search_bar import SearchBar
from tests.fixtures.snapshot_strategies import LONG_RUN
from tests.tui.helpers import loaded, make_app, settle, tiny_path

REPEATS = 5 if LONG_RUN else 3  # a long run (MEMTUI_FUZZ_EXAMPLES) repeats each race more


def burst(app, text: str = "", *keys: str) -> None:
    """Post ``text`` (one key per character), then ``keys``, with no pause in between."""
    for ch in text:
        app.post_message(events.Key(_character_to_key(ch) if not ch.isalnum() else ch, ch))
    for key in keys:
        app.post_message(events.Key(key, "\r" if key == "enter" else None))


def _names() -> list[tuple[str, int]]:
    """address_n of a few allocations of the tiny snapshot and their alloc events."""
    dev = loaded(str(tiny_path())).devices[0]
    out = []
    for life in (1, 4, 6):
        out.append((format_address_n(dev.lives.addr[life], dev.lives.version[life]), int(dev.lives.start[life])))
    return out


async def _main_screen(app, pilot) -> MainScreen:
    for _ in range(400):
        if isinstance(app.screen, MainScreen):
            return app.screen
        await asyncio.sleep(0.005)
    raise AssertionError("the main screen never appeared")


async def _wait_for_cursor(app, pilot, event: int) -> None:
    for _ in range(50):
        await settle(app, pilot)
        screen = app.screen
        if isinstance(screen, MainScreen) and screen.event_log.cursor_event == event:
            return
    screen = app.screen
    cursor = screen.event_log.cursor_event if isinstance(screen, MainScreen) else None
    raise AssertionError(f"cursor on {cursor}, not {event}; screen {screen!r}; status {_status(app)!r}")


def _status(app) -> str:
    screen = app.screen
    return str(screen.status.render()) if isinstance(screen, MainScreen) else ""


async def test_a_search_typed_as_the_main_screen_first_shows_lands():
    (name, event), *_ = _names()
    for _ in range(REPEATS):
        app = make_app(tiny_path())
        async with app.run_test(size=(100, 30)) as pilot:
            await _main_screen(app, pilot)
            burst(app, "/" + name, "enter")
            await _wait_for_cursor(app, pilot, event)
            assert not isinstance(app.screen, DetailScreen)
            assert not app.screen.query_one(SearchBar).has_class("-open")


async def test_a_search_typed_while_the_snapshot_loads_lands():
    (name, event), *_ = _names()
    for _ in range(REPEATS):
        app = make_app(tiny_path())
        async with app.run_test(size=(100, 30)) as pilot:
            burst(app, "/" + name, "enter")  # the loading screen is up
            await _main_screen(app, pilot)
            await _wait_for_cursor(app, pilot, event)
            assert not isinstance(app.screen, DetailScreen)


async def test_two_searches_back_to_back_both_land():
    (first, first_event), (second, second_event), (third, third_event) = _names()
    for _ in range(REPEATS):
        app = make_app(tiny_path())
        async with app.run_test(size=(100, 30)) as pilot:
            await _main_screen(app, pilot)
            await settle(app, pilot)
            burst(app, "/" + first, "enter")
            await _wait_for_cursor(app, pilot, first_event)
            burst(app, "/" + second, "enter")  # right after the first one lands
            await _wait_for_cursor(app, pilot, second_event)
            burst(app, "/" + first, "enter", "slash", *third, "enter")  # two in one burst
            await _wait_for_cursor(app, pilot, third_event)
            assert not isinstance(app.screen, DetailScreen)
            assert not app.screen.query_one(SearchBar).has_class("-open")
            assert app.focused is app.screen.event_log
