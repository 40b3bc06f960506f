"""Redraw only the lines of a pane that changed, and a border title without redrawing the pane.

A key that moves the event cursor by one event changes one block of the segment map, a few
lines of the inspector and the plot's legend, but ``refresh()`` redraws every line of each:
Textual styles, pads and composes each line again and writes it to the terminal. At ten
million events in tmux that was 9-11 ms of the key's 15-17 ms frame. A pane that mixes in
:class:`ChangedLines` draws its lines with :meth:`ChangedLines.draw_line` and, where its
content changed, calls :meth:`ChangedLines.refresh_changed`: the lines whose strip equals
the one on screen are left as they are. What is on screen is what ``render_line`` last
returned for each line; a change of size or scroll redraws the whole pane, as Textual does.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from memtui.tui.widgets.pass_style import PassStyle


class ChangedLines(PassStyle):
    """Mixed in before the Textual widget class (a line API widget: it defines ``draw_line``).
    Lines are compared in a drawing pass of their own (:class:`PassStyle`)."""

    # y -> the strip render_line last gave Textual for that line, and the geometry it was for
    _on_screen: dict[int, Strip] | None = None
    _drawn_for: tuple[Any, ...] | None = None
    _drawing = False

    def draw_line(self, y: int) -> Strip:
        """Line ``y`` of the visible content, as ``render_line`` would draw it."""
        raise NotImplementedError

    def render_lines(self, crop: Region) -> list[Strip]:
        geometry = self._geometry()
        if self._on_screen is None or geometry != self._drawn_for:
            self._on_screen = {}
            self._drawn_for = geometry
        self._drawing = True
        try:
            return super().render_lines(crop)  # type: ignore[misc]
        finally:
            self._drawing = False

    def render_line(self, y: int) -> Strip:
        strip = self.draw_line(y)
        if self._drawing and self._on_screen is not None:  # a line Textual puts on screen
            self._on_screen[y] = strip
        return strip

    def _geometry(self) -> tuple[Any, ...]:
        widget: Any = self
        return (widget.size, widget.scroll_offset, widget.virtual_size, widget.scrollable_content_region)

    def refresh_changed(self) -> None:
        """Redraw the lines whose strip differs from the one on screen (all of them after a
        change of size or scroll)."""
        widget: Any = self
        on_screen = self._on_screen
        if on_screen is None or self._geometry() != self._drawn_for:
            widget.refresh()
            return
        region = widget.scrollable_content_region
        with self.drawing_pass():
            changed = [Region(0, y, region.width, 1) for y in range(region.height)
                       if on_screen.get(y) != self.draw_line(y)]
        if changed:
            widget.refresh(*changed)


def retitle(widget: Widget, title: str) -> None:
    """Set ``widget``'s border title, redrawing only the border's top row.

    Textual's ``border_title`` setter redraws the whole widget, even when the title is the
    one it had; the segment map's title names the event, so every key would redraw the map.
    This stores the title as the setter does and marks the top row alone.
    """
    current = widget.border_title
    if current is not None and str(current) == title:
        return
    if not hasattr(widget, "_border_title"):  # a Textual without the setter's attribute
        widget.border_title = title
        return
    widget._border_title = widget.render_str(title).expand_tabs(4).split()[0]
    offset = widget.content_offset
    widget.refresh(Region(-offset.x, -offset.y, widget.outer_size.width, 1))
