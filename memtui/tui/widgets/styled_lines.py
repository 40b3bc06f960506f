"""The base of the explorer's short text panes: a scrollable list of styled lines.

A line is a list of (text, style) pairs; a subclass says how a style is drawn
(:meth:`StyledLines.rich_style_of`). Lines are drawn with the line API and their strips
kept until the lines or the theme change. Panes of tens to hundreds of lines (the stack
inspector, the breakdown pane) use it; a list with a row per event never does.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.tui.widgets.pass_style import PassStyle


class StyledLines(PassStyle, ScrollView):
    """Draws ``self.lines``; :meth:`set_lines` replaces them."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: list[list[tuple[str, object]]] = []
        self._strips: dict[int, Strip] = {}

    @property
    def text(self) -> str:
        """Plain text of everything shown (for tests and copy)."""
        return "\n".join("".join(t for t, _ in line) for line in self._lines)

    def rich_style_of(self, style: object) -> Style:
        """How a line's style name is drawn (a component class of the subclass, usually)."""
        raise NotImplementedError

    def set_lines(self, lines: list[list[tuple[str, object]]], keep_scroll: bool = True) -> None:
        old = self._lines
        self._lines = lines
        # Only the lines that differ are drawn again (the inspector's next event shares many);
        # a change of size or scroll draws them all.
        same = {k for k in range(min(len(lines), len(old))) if lines[k] == old[k]}
        self._strips = {k: strip for k, strip in self._strips.items() if k in same}
        width = max((sum(cell_len(t) for t, _ in line) for line in lines), default=0)
        before = (self.virtual_size, self.scroll_offset)
        self.virtual_size = Size(width + 1, len(lines))  # another count of lines: another size
        if not keep_scroll:
            self.scroll_to(0, 0, animate=False)
        if (self.virtual_size, self.scroll_offset) != before:
            self.refresh()
            return
        for k in range(len(lines)):
            if k not in same:
                self.refresh_lines(k)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        k = scroll_y + y
        if not 0 <= k < len(self._lines):
            return Strip.blank(width, self.base_style)
        strip = self._strips.get(k)
        if strip is None:
            strip = Strip([Segment(text, self.rich_style_of(style)) for text, style in self._lines[k]])
            self._strips[k] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, self.base_style)
