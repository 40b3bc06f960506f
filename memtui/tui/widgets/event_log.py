"""The event log: every trace entry as one line, virtual over millions of rows.

Line API: nothing is created per event. A row is drawn from the numpy columns when it
scrolls into view and kept in a small LRU cache of strips. The log shows either every
event or an optional sorted array of event indices (``set_rows``), so a filter can give it
a view without the log knowing how the view was made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.model import actions as act
from memtui.tui.messages import Latest
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.event_columns import ColumnLayout, EventColumns
from memtui.tui.widgets.pass_style import PassStyle

_ACTION_CLASS = {
    act.ALLOC: "event-log--alloc",
    act.FREE_REQUESTED: "event-log--free",
    act.FREE_COMPLETED: "event-log--free",
    act.FREE: "event-log--free",
    act.SEGMENT_ALLOC: "event-log--segment",
    act.SEGMENT_MAP: "event-log--segment",
    act.SEGMENT_FREE: "event-log--segment",
    act.SEGMENT_UNMAP: "event-log--segment",
    act.OOM: "event-log--oom",
}
CURSOR_MARK = "▶"


class EventLog(PassStyle, ScrollView, can_focus=True):
    """Trace entries of one device; the cursor selects the event the other panes show."""

    DEFAULT_CSS = """
    EventLog {
        overflow-x: hidden;
        overflow-y: scroll;
        & > .event-log--header { color: $text-muted; text-style: bold underline; }
        & > .event-log--muted { color: $text-muted; }
        & > .event-log--alloc { color: $success; }
        & > .event-log--free { color: $warning; }
        & > .event-log--segment { color: $accent; }
        & > .event-log--oom { color: $error; text-style: bold reverse; }
        & > .event-log--other { color: $text-muted; }
        & > .event-log--cursor {
            color: $block-cursor-blurred-foreground;
            background: $block-cursor-blurred-background;
        }
        &:focus > .event-log--cursor {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: bold;
        }
    }
    """
    COMPONENT_CLASSES = {
        "event-log--header", "event-log--muted", "event-log--alloc", "event-log--free",
        "event-log--segment", "event-log--oom", "event-log--other", "event-log--cursor",
    }
    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,g", "first", "First event", show=False),
        Binding("end,G", "last", "Last event", show=False),
        Binding("enter", "detail", "Detail"),
    ]

    @dataclass
    class CursorMoved(Latest):
        """The selected event changed (a held key's moves coalesce: the panes follow the last)."""

        event: int

    @dataclass
    class DetailRequested(Message):
        """Enter on an event: open its full detail."""

        event: int

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: DeviceView | None = None
        self._columns: EventColumns | None = None
        self._rows: np.ndarray | None = None  # visible event indices; None: all events
        self._cursor_row = 0
        self._strips: LRUCache[tuple, Strip] = LRUCache(2048)
        self._layout: tuple[int, ColumnLayout] | None = None

    # -- data --------------------------------------------------------------------
    def set_view(self, view: DeviceView, event: int | None = None) -> None:
        """Show a device; the cursor goes to ``event`` (default: the last event)."""
        self._view = view
        self._columns = EventColumns(view)
        self._rows = None
        self._layout = None
        self._strips.clear()
        self._update_virtual_size()
        self.go_to_event(view.n_events - 1 if event is None else event, notify=True)
        self.call_after_refresh(self._scroll_to_cursor, True)

    def set_rows(self, rows: np.ndarray | None) -> None:
        """Show only these events (sorted indices), or every event for ``None``.

        The cursor stays on the same event when it is still visible, else the nearest one.
        """
        current = self.cursor_event
        self._rows = None if rows is None else np.asarray(rows, np.int64)
        self._strips.clear()
        self._update_virtual_size()
        self._cursor_row = -1
        self._move_to_row(self.nearest_row(current) if current is not None else 0, notify=True)
        self.call_after_refresh(self._scroll_to_cursor, True)

    def visible_rows(self) -> np.ndarray:
        """Event indices currently listed (all events when no view is set)."""
        if self._rows is not None:
            return self._rows
        return np.arange(self._view.n_events if self._view else 0, dtype=np.int64)

    @property
    def row_count(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        return self._view.n_events if self._view else 0

    @property
    def cursor_event(self) -> int | None:
        if not self.row_count:
            return None
        return self.event_at_row(self._cursor_row)

    @property
    def cursor_row(self) -> int:
        return self._cursor_row

    def event_at_row(self, row: int) -> int:
        return int(self._rows[row]) if self._rows is not None else row

    def row_of_event(self, event: int) -> int | None:
        if self._rows is None:
            return event if 0 <= event < self.row_count else None
        pos = int(np.searchsorted(self._rows, event))
        return pos if pos < len(self._rows) and int(self._rows[pos]) == event else None

    def nearest_row(self, event: int) -> int:
        if self._rows is None:
            return min(max(event, 0), max(self.row_count - 1, 0))
        pos = int(np.searchsorted(self._rows, event))
        return min(pos, max(len(self._rows) - 1, 0))

    # -- cursor ------------------------------------------------------------------
    def go_to_event(self, event: int, notify: bool = True) -> bool:
        """Put the cursor on ``event``; False when it is not in the current view."""
        row = self.row_of_event(event)
        if row is None:
            return False
        self._move_to_row(row, notify=notify, center=True)
        return True

    def _move_to_row(self, row: int, notify: bool = True, center: bool = False) -> None:
        """Move the cursor; ``center`` scrolls a far target to mid-page and always notifies."""
        count = self.row_count
        row = min(max(row, 0), max(count - 1, 0))
        old = self._cursor_row
        self._cursor_row = row
        self._scroll_to_cursor(center)
        self.refresh_line(old + 1)
        self.refresh_line(row + 1)
        if notify and count and (old != row or center):
            self.post_message(self.CursorMoved(self.event_at_row(row)))

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # one line is the header

    def _scroll_to_cursor(self, center: bool) -> None:
        top, page, row = round(self.scroll_y), self._page, self._cursor_row
        if top <= row < top + page:
            return
        target = row - page // 2 if center else (row if row < top else row - page + 1)
        self.scroll_to(y=max(0, target), animate=False)

    def action_cursor_up(self) -> None:
        self._move_to_row(self._cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._move_to_row(self._cursor_row + 1)

    def action_page_up(self) -> None:
        page = self._page
        self.scroll_to(y=max(0, round(self.scroll_y) - page), animate=False)
        self._move_to_row(self._cursor_row - page)

    def action_page_down(self) -> None:
        page = self._page
        self.scroll_to(y=round(self.scroll_y) + page, animate=False)
        self._move_to_row(self._cursor_row + page)

    def action_first(self) -> None:
        self._move_to_row(0)

    def action_last(self) -> None:
        self._move_to_row(self.row_count - 1)

    def action_detail(self) -> None:
        if self.cursor_event is not None:
            self.post_message(self.DetailRequested(self.cursor_event))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1 and self.row_count:
            self._move_to_row(round(self.scroll_y) + event.y - 1)

    # -- rendering ---------------------------------------------------------------
    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count + 1)

    def on_resize(self) -> None:
        self._update_virtual_size()
        self._strips.clear()
        self._scroll_to_cursor(center=False)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def _column_layout(self, width: int) -> ColumnLayout:
        if self._layout is None or self._layout[0] != width:
            self._layout = (width, self._columns.layout(width - 1))
        return self._layout[1]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base_style
        if self._columns is None or width <= 0:
            return Strip.blank(width, base)
        layout = self._column_layout(width)
        if y == 0:
            style = self.get_component_rich_style("event-log--header")
            return Strip([Segment(" " + " ".join(self._columns.header(layout)), style)]).crop_extend(0, width, style)
        row = round(self.scroll_y) + y - 1
        if row >= self.row_count:
            return Strip.blank(width, base)
        event = self.event_at_row(row)
        is_cursor = row == self._cursor_row
        key = (event, width, is_cursor, self.has_focus if is_cursor else False)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_event(event, layout, width, is_cursor)
            self._strips[key] = strip
        return strip

    def _render_event(self, event: int, layout: ColumnLayout, width: int, is_cursor: bool) -> Strip:
        cells, code = self._columns.cells(event, layout)
        muted = self.get_component_rich_style("event-log--muted")
        action_style = self.get_component_rich_style(_ACTION_CLASS.get(code, "event-log--other"))
        plain = self.base_style
        styles = [muted] + ([muted] if layout.time else []) + [action_style, plain, plain]
        styles += ([muted] if layout.stream else []) + [plain]
        cursor: Style | None = self.get_component_rich_style("event-log--cursor") if is_cursor else None
        segments = [Segment(CURSOR_MARK if is_cursor else " ", cursor or plain)]
        for k, (text, style) in enumerate(zip(cells, styles)):
            if cursor is not None:
                style = style + cursor
            if k:
                segments.append(Segment(" ", cursor or plain))
            segments.append(Segment(text, style))
        fill = cursor or plain
        return Strip(segments).crop_extend(0, width, fill)

    def on_focus(self) -> None:
        self.refresh_line(self._cursor_row + 1)

    def on_blur(self) -> None:
        self.refresh_line(self._cursor_row + 1)
