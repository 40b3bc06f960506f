"""A widget's own style, looked up once for each time it is drawn.

Textual's ``rich_style`` walks the styles of every ancestor of the widget, each time it is
read: 25-40 µs here. The panes that draw line by line read it for every line and every
part of one, about eighty times for each key at ten million events, a third of the time
Textual spent drawing the key's frame. Within one drawing pass the style cannot change,
so these panes read :attr:`PassStyle.base_style`, looked up as the pass begins.
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip


class PassStyle:
    """Mixed in before the Textual widget class."""

    _pass_style: Style | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass_style = self.rich_style  # type: ignore[attr-defined]
        try:
            return super().render_lines(crop)  # type: ignore[misc]
        finally:
            self._pass_style = None

    @property
    def base_style(self) -> Style:
        """The widget's ``rich_style``: the one of this drawing pass while one is under way."""
        style = self._pass_style
        return style if style is not None else self.rich_style  # type: ignore[attr-defined]
