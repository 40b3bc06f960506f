"""The stack inspector: everything about the selected event, block or segment.

A line-API scroll view over a short list of styled lines (tens to hundreds, never one per
event); long C++ names scroll horizontally instead of wrapping.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.tui.inspector_content import InspectOptions, Line

_STYLE_CLASS = {
    "title": "stack-inspector--title", "section": "stack-inspector--section", "label": "stack-inspector--label",
    "value": "stack-inspector--value", "location": "stack-inspector--location",
    "muted": "stack-inspector--muted", "user": "stack-inspector--user",
    "frame": "stack-inspector--frame", "native": "stack-inspector--native", "source": "stack-inspector--source",
    "source-mark": "stack-inspector--source-mark", "warn": "stack-inspector--warn", "error": "stack-inspector--error",
}


class StackInspector(ScrollView, can_focus=True):
    """Shows lines produced by ``memtui.tui.inspector_content`` for the current selection."""

    DEFAULT_CSS = """
    StackInspector {
        overflow-x: auto;
        overflow-y: auto;
        & > .stack-inspector--title { text-style: bold; }
        & > .stack-inspector--section { text-style: bold underline; color: $accent; }
        & > .stack-inspector--label { color: $text-muted; }
        & > .stack-inspector--value { }
        & > .stack-inspector--muted { color: $text-muted; }
        & > .stack-inspector--location { color: $accent; }
        & > .stack-inspector--user { text-style: bold; }
        & > .stack-inspector--frame { }
        & > .stack-inspector--native { color: $text-muted; text-style: italic; }
        & > .stack-inspector--source { color: $text-muted; }
        & > .stack-inspector--source-mark { text-style: bold; }
        & > .stack-inspector--warn { color: $warning; }
        & > .stack-inspector--error { color: $error; text-style: bold; }
    }
    """
    COMPONENT_CLASSES = set(_STYLE_CLASS.values())
    BINDINGS = [
        Binding("up,k", "scroll_up", "Scroll up", show=False),
        Binding("down,j", "scroll_down", "Scroll down", show=False),
        Binding("left,h", "scroll_left", "Scroll left", show=False),
        Binding("right,l", "scroll_right", "Scroll right", show=False),
        Binding("home,g", "scroll_home", "Top", show=False),
        Binding("end,G", "scroll_end", "Bottom", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.options = InspectOptions()
        self._lines: list[Line] = []
        self._strips: dict[int, Strip] = {}
        self._source: Callable[[InspectOptions], list[Line]] | None = None

    @property
    def text(self) -> str:
        """Plain text of everything shown (for tests and copy)."""
        return "\n".join("".join(t for t, _ in line) for line in self._lines)

    def show(self, source: Callable[[InspectOptions], list[Line]], keep_scroll: bool = False) -> None:
        """Show what ``source(options)`` returns; it is called again when options change."""
        self._source = source
        self._rebuild(keep_scroll)

    def set_show_native(self, show: bool) -> None:
        self.options.show_native = show
        self._rebuild(keep_scroll=True)

    def _rebuild(self, keep_scroll: bool) -> None:
        self._lines = self._source(self.options) if self._source else []
        self._strips.clear()
        width = max((sum(Text(t).cell_len for t, _ in line) for line in self._lines), default=0)
        self.virtual_size = Size(width + 1, len(self._lines))
        if not keep_scroll:
            self.scroll_to(0, 0, animate=False)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        k = scroll_y + y
        if not 0 <= k < len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(k)
        if strip is None:
            segments = [Segment(text, self.get_component_rich_style(_STYLE_CLASS.get(style, "stack-inspector--value")))
                        for text, style in self._lines[k]]
            strip = Strip(segments)
            self._strips[k] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
