"""The timeline: allocated (area) and reserved (line) bytes over the whole trace.

Each column stands for a slice of events and shows its maximum, so short spikes stay
visible however long the trace. Annotation starts are marked under the plot and the
event cursor is marked on the same axis line, as are the events a filter matches.

Stacked by category (:meth:`Timeline.set_stacked`), each column shows the allocated bytes
at its slice's peak split into parameters, gradients, optimizer state, activations, ...
(memtui/analysis/categories.py), one colour each: activations rise in forward and fall in
backward, the optimizer state appears at the first step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.plot import BAND, FILL, LINE, column_of_event, event_of_column, raster
from memtui.tui.views.stacked_plot import CATEGORY_COLOURS, NONE, category_css, peak_points, stacked_raster
from memtui.tui.widgets.pass_style import PassStyle
from memtui.units import format_bytes

LABEL_WIDTH = 11
CURSOR_MARK = "▲"
ANNOTATION_MARK = "╵"
MATCH_MARK = "•"
# Legend names of the built-in categories (memtui/analysis/categories.py); a user's own keep theirs.
SHORT_NAMES = {"parameters": "params", "gradients": "grads", "optimizer_state": "optim",
               "activations": "activ", "temporaries": "temp", "other": "other", "unknown": "unknown"}


class Timeline(PassStyle, Widget):
    """Memory over the trace for one device, with the cursor event marked."""

    DEFAULT_CSS = """
    Timeline {
        height: 8;
        & > .timeline--allocated { color: $success; }
        & > .timeline--band { color: $success 60%; }
        & > .timeline--reserved { color: $primary; }
        & > .timeline--muted { color: $text-muted; }
        & > .timeline--cursor { color: $warning; text-style: bold; }
        & > .timeline--annotation { color: $secondary; }
        & > .timeline--match { color: $accent; text-style: bold; }
    }
    """ + category_css("Timeline", "timeline--category")
    COMPONENT_CLASSES = {"timeline--allocated", "timeline--band", "timeline--reserved", "timeline--muted",
                         "timeline--cursor", "timeline--annotation", "timeline--match",
                         *(f"timeline--category-{k}" for k in range(len(CATEGORY_COLOURS)))}

    @dataclass
    class Seek(Message):
        """A click on the plot: go to this event."""

        event: int

    class CursorChanged(Message):
        """The cursor was set (moved, or shown again after a change of device): views that
        follow the cursor, such as the breakdown pane, update from it. Worth nothing once a
        newer one is queued behind it (a held key costs one update, not one per step)."""

        def __init__(self, event: int) -> None:
            super().__init__()
            self.event = event

        def can_replace(self, message: Message) -> bool:
            return type(message) is type(self)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: DeviceView | None = None
        self._cursor = 0
        self._cache: dict[tuple, list[Strip]] = {}
        self._marks: np.ndarray | None = None  # sorted events a filter matched
        self._mark_columns: tuple[int, np.ndarray] | None = None
        # Stacked by category: bytes per category at sorted events, and the category names.
        self._values_at: Callable[[np.ndarray], np.ndarray] | None = None
        self._category_names: list[str] = []
        self._present: list[int] = []  # categories with bytes in the drawn columns

    def set_view(self, view: DeviceView) -> None:
        if self._view is not None and view is not self._view:
            self._values_at = None  # categories belong to one device: whoever set them sets them again
        self._view = view
        self._cache.clear()
        self._mark_columns = None
        self.refresh()

    @property
    def stacked(self) -> bool:
        return self._values_at is not None

    def set_stacked(self, values_at: Callable[[np.ndarray], np.ndarray] | None, names: list[str] | None = None) -> None:
        """Draw allocated memory stacked by category: ``values_at(events)`` gives bytes per
        category (rows, in ``names`` order) after each of the sorted ``events``; None draws
        the allocated and reserved curves again."""
        self._values_at = values_at
        self._category_names = list(names or [])
        self._cache.clear()
        self.refresh()

    def category_style(self, k: int) -> Style:
        """The colour of category ``k`` (shared with the breakdown pane)."""
        return self.get_component_rich_style(f"timeline--category-{min(k, len(CATEGORY_COLOURS) - 1)}")

    def set_marks(self, events: np.ndarray | None) -> None:
        """Mark the columns holding these (sorted) events on the axis; None removes the marks."""
        self._marks = events
        self._mark_columns = None
        self.refresh()

    def _columns_with_marks(self, n: int, cols: int) -> np.ndarray:
        if self._mark_columns is None or self._mark_columns[0] != cols:
            # Sorted events give non-decreasing columns: one pass finds the distinct ones.
            c = (self._marks.astype(np.int64) * cols) // max(n, 1)
            c = c[np.diff(c, prepend=-1) != 0]
            self._mark_columns = (cols, np.minimum(c, cols - 1))
        return self._mark_columns[1]

    def set_cursor(self, event: int) -> None:
        if event != self._cursor:
            width, height = self.size
            n, cols = (self._view.n_events if self._view is not None else 0), self._plot_width(width)
            moved = not n or not cols or column_of_event(event, n, cols) != column_of_event(self._cursor, n, cols)
            self._cursor = event
            # The cursor shows in the legend (the first line) and on the axis (the last); the
            # plot's lines between are the same.
            self.refresh(Region(0, 0, width, 1), *([Region(0, height - 1, width, 1)] if moved else []))
        self.post_message(self.CursorChanged(event))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def _plot_width(self, width: int) -> int:
        return max(0, width - LABEL_WIDTH)

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        if self._view is None or width <= 0:
            return Strip.blank(width, self.base_style)
        plot = self._plot_strips(width, height)
        if y == 0:
            return self._legend(width)
        if y == height - 1:
            return self._axis(width)
        return plot[y - 1] if 0 <= y - 1 < len(plot) else Strip.blank(width, self.base_style)

    def _plot_strips(self, width: int, height: int) -> list[Strip]:
        key = (width, height, self.stacked)
        strips = self._cache.get(key)
        if strips is not None:
            return strips
        if self.stacked:
            strips = self._stacked_strips(width, height)
            self._cache = {key: strips}
            return strips
        view = self._view
        rows, cols = max(0, height - 2), self._plot_width(width)
        highest = max(view.peak_reserved, view.peak_allocated)  # the top row's label
        top = max(highest, 1)
        picture = raster(view.allocated_extremes, view.reserved_extremes, cols, rows, top)
        styles = {FILL: self.get_component_rich_style("timeline--allocated"),
                  BAND: self.get_component_rich_style("timeline--band"),
                  LINE: self.get_component_rich_style("timeline--reserved")}
        muted = self.get_component_rich_style("timeline--muted")
        plain = self.base_style
        strips = []
        for r, chars in enumerate(picture.chars):
            label = format_bytes(highest) if r == 0 else ("0 B" if r == rows - 1 else "")
            axis = f"{label:>{LABEL_WIDTH - 2}} ┤" if r in (0, rows - 1) else " " * (LABEL_WIDTH - 1) + "│"
            segments = [Segment(axis, muted)]
            kinds = picture.kind[r]
            start = 0
            for c in range(1, len(chars) + 1):
                if c == len(chars) or kinds[c] != kinds[start]:
                    style = styles.get(int(kinds[start]), plain)
                    segments.append(Segment(chars[start:c], style))
                    start = c
            strips.append(Strip(segments).crop_extend(0, width, plain))
        self._cache = {key: strips}
        return strips

    def _stacked_strips(self, width: int, height: int) -> list[Strip]:
        view = self._view
        rows, cols = max(0, height - 2), self._plot_width(width)
        points = peak_points(view.allocated, cols) if view.n_events else np.zeros(0, np.int64)
        values = self._values_at(points) if len(points) else np.zeros((len(self._category_names), cols), np.int64)
        self._present = [k for k in range(len(values)) if values[k].any()]
        highest = int(values.sum(axis=0).max()) if values.size else 0  # the top row's label
        top = max(highest, 1)
        picture = stacked_raster(values, rows, top)
        muted = self.get_component_rich_style("timeline--muted")
        plain = self.base_style
        colours = [self.category_style(k).color for k in range(len(values))]
        strips = []
        for r in range(rows):
            label = format_bytes(highest) if r == 0 else ("0 B" if r == rows - 1 else "")
            axis = f"{label:>{LABEL_WIDTH - 2}} ┤" if r in (0, rows - 1) else " " * (LABEL_WIDTH - 1) + "│"
            segments = [Segment(axis, muted)]
            chars, fg, bg = picture.chars[r], picture.fg[r], picture.bg[r]
            start = 0
            for c in range(1, cols + 1):
                if c == cols or fg[c] != fg[start] or bg[c] != bg[start]:
                    style = plain + Style(color=colours[fg[start]] if fg[start] != NONE else None,
                                          bgcolor=colours[bg[start]] if bg[start] != NONE else None)
                    segments.append(Segment("".join(chars[start:c]), style))
                    start = c
            strips.append(Strip(segments).crop_extend(0, width, plain))
        return strips

    def _stacked_legend(self, width: int, at: str, alloc: int) -> Strip:
        muted = self.get_component_rich_style("timeline--muted")
        segments = [Segment(" " + at, muted), Segment(format_bytes(alloc) + " ", self.base_style)]
        for k in self._present or range(len(self._category_names)):
            name = self._category_names[k]
            segments.append(Segment("■", self.category_style(k)))
            segments.append(Segment(SHORT_NAMES.get(name, name) + " ", self.base_style))
        return Strip(segments).crop_extend(0, width, self.base_style)

    def _legend(self, width: int) -> Strip:
        view, i = self._view, self._cursor
        n = view.n_events
        fill = self.get_component_rich_style("timeline--allocated")
        line = self.get_component_rich_style("timeline--reserved")
        muted = self.get_component_rich_style("timeline--muted")
        if n:
            shown = view.device.shown_index(i)  # the source's number, as the event log gives it
            at = f"event {shown:,}: " if view.device.source_index is not None else f"event {i:,} of {n:,}: "
            short_at = f"event {shown:,}: "
            alloc, reserved = int(view.allocated[i]), int(view.reserved[i])
        else:
            at = short_at = "no trace events: "
            alloc, reserved = view.device.allocated, view.device.reserved
        if self.stacked:
            self._plot_strips(width, self.size.height)  # which categories are drawn
            return self._stacked_legend(width, at, alloc)
        peak = [Segment(f"peak {format_bytes(view.peak_allocated)}", muted)]
        # The longest that fits, each figure whole: the event's count of events, then the
        # labels' length, then the peak give way before anything is cut.
        forms = [(at, "allocated", "reserved", peak), (short_at, "allocated", "reserved", peak),
                 (short_at, "alloc", "res", peak), (short_at, "alloc", "res", [])]
        for at_text, alloc_label, reserved_label, tail in forms:
            segments = [
                Segment(" " + at_text, muted),
                Segment(f"⣿ {alloc_label} ", fill), Segment(format_bytes(alloc) + "  ", self.base_style),
                Segment(f"⠒ {reserved_label} ", line), Segment(format_bytes(reserved) + "  ", self.base_style),
                *tail,
            ]
            if Segment.get_line_length(segments) <= width:
                break
        span = view.annotations.active_at(i) if n else ""
        if span:
            segments.append(Segment(f"  in {span}", self.get_component_rich_style("timeline--annotation")))
        return Strip(segments).crop_extend(0, width, self.base_style)

    def _axis(self, width: int) -> Strip:
        view = self._view
        cols = self._plot_width(width)
        n = view.n_events
        axis = np.full(cols, "─", dtype="<U1")
        if self._marks is not None and len(self._marks) and cols:
            axis[self._columns_with_marks(n, cols)] = MATCH_MARK
        marks = view.annotations.event
        if len(marks) and cols:
            # Marks that share a column are set twice, not made unique first: np.unique imports
            # numpy.ma, 15-25 ms of the first screen.
            axis[np.minimum(marks * cols // max(n, 1), cols - 1)] = ANNOTATION_MARK
        cursor_col = column_of_event(self._cursor, n, cols) if n and cols else -1
        muted = self.get_component_rich_style("timeline--muted")
        note = self.get_component_rich_style("timeline--annotation")
        if cursor_col >= 0:
            axis[cursor_col] = CURSOR_MARK
        cursor = self.get_component_rich_style("timeline--cursor")
        match = self.get_component_rich_style("timeline--match")
        segments = [Segment(" " * (LABEL_WIDTH - 1) + "└", muted)]
        start = 0
        for c in range(1, cols + 1):
            if c == cols or axis[c] != axis[start]:
                char = str(axis[start])
                style = {CURSOR_MARK: cursor, ANNOTATION_MARK: note, MATCH_MARK: match}.get(char, muted)
                segments.append(Segment(char * (c - start), style))
                start = c
        return Strip(segments).crop_extend(0, width, self.base_style)

    def on_click(self, event: events.Click) -> None:
        cols = self._plot_width(self.size.width)
        c = event.x - LABEL_WIDTH
        if self._view is not None and self._view.n_events and 0 <= c < cols:
            self.post_message(self.Seek(event_of_column(c, self._view.n_events, cols)))
