"""A key that moves the event log's cursor is drawn in one frame: the log, the map, the
inspector and the plot together (memtui/tui/one_frame.py). The panes the screen changed
were drawn a frame later, 16-40 ms after the log's cursor."""

from __future__ import annotations

from textual.screen import Screen

from memtui.tui.widgets.event_log import EventLog
from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.stack_inspector import StackInspector
from memtui.tui.widgets.timeline import Timeline
from tests.tui.helpers import make_app, ready, settle, tiny_path

PANES = (EventLog, SegmentMap, StackInspector, Timeline)


async def test_the_panes_a_cursor_move_changes_are_drawn_with_the_cursor(monkeypatch):
    frames: list[set[type]] = []
    draw = Screen._compositor_refresh

    def noting_frame(screen) -> None:  # the widgets each frame draws (the screen: all of them)
        frames.append({Screen if w is screen else type(w) for w in screen._dirty_widgets})
        draw(screen)

    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        await pilot.pause(0.2)
        monkeypatch.setattr(Screen, "_compositor_refresh", noting_frame)
        for key in ("up", "up", "home", "end"):
            frames.clear()
            await pilot.press(key)
            await pilot.pause(0.1)
            drawn = [frame for frame in frames if frame & set(PANES)]
            assert drawn, key
            first = drawn[0]
            assert Screen in first or set(PANES) <= first, (key, frames, screen.event_log.cursor_event)


async def test_the_screen_is_fitted_to_the_terminal_before_its_first_layout():
    # The plot's display was set on the first resize, after the first screen: setting it (even
    # to what it was) laid the screen out again and redrew every pane, and the first key waited.
    for size, shown in (((120, 40), True), ((80, 14), False)):
        app = make_app(tiny_path())
        async with app.run_test(size=size) as pilot:
            screen = await ready(app, pilot)
            await settle(app, pilot)
            timeline = screen.query_one(Timeline)
            assert timeline.display is shown
            assert timeline.styles.inline.has_rule("display") is not shown  # set only where it changes
