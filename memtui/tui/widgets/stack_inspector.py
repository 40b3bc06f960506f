"""The stack inspector: everything about the selected event, block or segment.

A line-API scroll view over a short list of styled lines (tens to hundreds, never one per
event); long C++ names scroll horizontally instead of wrapping.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from textual.binding import Binding

from memtui.tui.views.inspector_content import InspectOptions, Line
from memtui.tui.widgets.styled_lines import StyledLines

_STYLE_CLASS = {
    "title": "stack-inspector--title", "section": "stack-inspector--section", "label": "stack-inspector--label",
    "value": "stack-inspector--value", "location": "stack-inspector--location",
    "muted": "stack-inspector--muted", "user": "stack-inspector--user",
    "frame": "stack-inspector--frame", "native": "stack-inspector--native", "source": "stack-inspector--source",
    "source-mark": "stack-inspector--source-mark", "warn": "stack-inspector--warn", "error": "stack-inspector--error",
}


class StackInspector(StyledLines, can_focus=True):
    """Shows lines produced by ``memtui.tui.views.inspector_content`` for the current selection."""

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
        self._source: Callable[[InspectOptions], list[Line]] | None = None

    def show(self, source: Callable[[InspectOptions], list[Line]], keep_scroll: bool = False) -> None:
        """Show what ``source(options)`` returns; it is called again when options change."""
        self._source = source
        self._rebuild(keep_scroll)

    def set_show_native(self, show: bool) -> None:
        self.options.show_native = show
        self._rebuild(keep_scroll=True)

    def _rebuild(self, keep_scroll: bool) -> None:
        self.set_lines(self._source(self.options) if self._source else [], keep_scroll)

    def rich_style_of(self, style: object) -> Style:
        return self.get_component_rich_style(_STYLE_CLASS.get(style, "stack-inspector--value"))

