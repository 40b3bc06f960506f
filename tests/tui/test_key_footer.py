"""The footer (memtui/tui/widgets/key_footer.py) shows the screen's keys as Textual's footer
lists them, follows the focus, is one widget whatever the keys, and a click presses a key."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.widget import Widget

from memtui.tui.widgets.key_footer import KeyFooter
from tests.tui.helpers import make_app, ready, settle, tiny_path


def _expected(screen) -> list[str]:
    """The first key of each action shown, in the order of the screen's active bindings."""
    seen: dict[str, str] = {}
    palette = screen.app.COMMAND_PALETTE_BINDING
    for key, active in screen.active_bindings.items():
        if active.binding.show and key != palette:
            seen.setdefault(active.binding.action, active.binding.key)
    return list(seen.values())


async def _footer(app, pilot) -> tuple:
    """The explorer's screen, once it is up and its workers are done, and its footer."""
    screen = await ready(app, pilot)
    await settle(app, pilot)
    return screen, screen.query_one(KeyFooter)


async def test_the_footer_follows_the_keys_of_the_focus():
    app = make_app(tiny_path())
    async with app.run_test(size=(160, 40)) as pilot:
        screen, footer = await _footer(app, pilot)
        assert [item.key for item in footer.items] == _expected(screen) and footer.palette is not None
        assert not list(footer.query(Widget))  # one widget, however many keys
        line = footer.render_line(0).text
        assert line.startswith(" ⏎ Detail  o Next OOM ") and line.rstrip().endswith("▏^p palette")
        await pilot.press("slash")  # the search bar has the focus, and a key of its own
        await settle(app, pilot)
        assert "escape" in [item.key for item in footer.items]
        assert [item.key for item in footer.items] == _expected(screen)
        await pilot.press("escape")
        await settle(app, pilot)
        assert "escape" not in [item.key for item in footer.items]
        await pilot.press("tab")  # the map: keys of its own
        await settle(app, pilot)
        assert [item.key for item in footer.items] == _expected(screen) and "m" in footer.render_line(0).text


async def test_keys_that_do_not_change_leave_the_footer_undrawn(monkeypatch):
    app = make_app(tiny_path())
    async with app.run_test(size=(160, 40)) as pilot:
        screen, footer = await _footer(app, pilot)
        refreshed: list[bool] = []
        monkeypatch.setattr(footer, "refresh", lambda *a, **k: refreshed.append(True))
        screen.refresh_bindings()
        await pilot.pause()
        assert refreshed == []


async def test_a_click_on_a_key_presses_it():
    app = make_app(tiny_path())
    async with app.run_test(size=(160, 40)) as pilot:
        screen, footer = await _footer(app, pilot)
        footer.render_line(0)
        first, _end = footer.cells_of("question_mark")
        await pilot.click(KeyFooter, offset=(first + 1, 0))
        await settle(app, pilot)
        assert type(app.screen).__name__ == "HelpScreen"


async def test_a_maximized_pane_keeps_the_keys_and_a_narrow_terminal_its_first_keys():
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 30)) as pilot:
        screen, footer = await _footer(app, pilot)
        screen.action_maximize()
        await pilot.pause()
        assert screen.maximized is not None and footer.display and footer.region.height == 1
        assert footer.render_line(0).text.startswith(" ⏎ Detail")
    app = make_app(tiny_path())
    async with app.run_test(size=(20, 12)) as pilot:
        screen, footer = await _footer(app, pilot)
        assert footer.render_line(0).text.startswith(" ⏎ Detail")  # the palette's key gives way


def test_a_disabled_key_is_dimmed_in_its_own_colours():
    from memtui.tui.widgets.key_footer import FooterItem

    footer = KeyFooter()
    footer.get_component_rich_style = lambda name, **_: Style(color="#ffa62b", bold=True)  # type: ignore[method-assign]
    enabled, disabled = (footer._parts(FooterItem("x", "x", "Export", on)) for on in (True, False))
    assert disabled[0].style.color == enabled[0].style.color and disabled[0].style.dim and not enabled[0].style.dim


async def test_the_key_under_the_mouse_is_highlighted():
    app = make_app(tiny_path())
    async with app.run_test(size=(160, 40)) as pilot:
        screen, footer = await _footer(app, pilot)
        line = footer.render_line(0)
        first, end = footer.cells_of("question_mark")
        plain = {segment.style.bgcolor for segment in line.divide([first, end])[1]}
        await pilot.hover(KeyFooter, offset=(first + 1, 0))
        await pilot.pause()
        lit = footer.render_line(0).divide([first, end])
        assert {segment.style.bgcolor for segment in lit[1]} != plain  # the key under the mouse
        assert [s.style for s in lit[0]] == [s.style for s in line.divide([first, end])[0]]  # the others as they were
        await pilot.hover(screen.event_log)
        await pilot.pause()
        assert {segment.style.bgcolor for segment in footer.render_line(0).divide([first, end])[1]} == plain


async def test_the_wheel_moves_keys_that_do_not_fit_sideways():
    """At 40 columns the explorer's keys do not fit: the wheel brings the cut ones in, a key
    at a time, until the last is whole, and brings the first ones back; a click finds the key
    where it is drawn after a move."""
    app = make_app(tiny_path())
    async with app.run_test(size=(40, 20)) as pilot:

        async def wheel(event_type) -> None:
            await pilot._post_mouse_events([event_type], KeyFooter, offset=(1, 0))
            await pilot.pause()
            footer.render_line(0)

        screen, footer = await _footer(app, pilot)
        first_line = footer.render_line(0).text
        last = footer.items[-1]
        assert footer.cells_of(last.key) is None  # cut: not drawn
        moves = 0
        while footer.cells_of(last.key) is None or footer._cut:
            await wheel(events.MouseScrollDown)
            moves += 1
            assert moves < len(footer.items), "the wheel never brought the last key in"
        await wheel(events.MouseScrollDown)  # the last key whole: no further
        assert footer.cells_of(last.key) is not None and not footer._cut
        for _ in range(moves + 3):  # back past the first key: it stays first
            await wheel(events.MouseScrollUp)
        assert footer.render_line(0).text == first_line
        await wheel(events.MouseScrollRight)
        second = footer.items[1]
        assert footer.render_line(0).text.startswith(f" {second.shown_as} ")
        assert footer.cells_of(second.key)[0] == 0 and footer.cells_of(footer.items[0].key) is None
