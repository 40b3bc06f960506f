"""A widget's own style, looked up once for each time it is drawn.

Textual's ``rich_style`` walks the styles of every ancestor of the widget, each time it is
read: 25-40 µs here. The panes that draw line by line read it for every line and every
part of one, about eighty times for each key at ten million events, a third of the time
Textual spent drawing the key's frame. Within one drawing pass the style cannot change,
so these panes read :attr:`PassStyle.base_style`, looked up as the pass begins.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip


class PassStyle:
    """Mixed in before the Textual widget class."""

    _pass_style: Style | None = None
    _pass_width: int | None = None
    _pass_components: dict[str, Style] | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        with self.drawing_pass():
            return super().render_lines(crop)  # type: ignore[misc]

    @contextmanager
    def drawing_pass(self) -> Iterator[None]:
        """Lines drawn inside read the style (and the width) looked up as the pass begins."""
        self._pass_style = self.rich_style  # type: ignore[attr-defined]
        self._pass_components = {}
        try:
            yield
        finally:
            self._pass_style = self._pass_width = self._pass_components = None

    def component_style(self, name: str) -> Style:
        """``get_component_rich_style(name)``, looked up once a pass (a refresh forgets
        Textual's own cache of them)."""
        components = self._pass_components
        if components is None:
            return self.get_component_rich_style(name)  # type: ignore[attr-defined,no-any-return]
        style = components.get(name)
        if style is None:
            style = components[name] = self.get_component_rich_style(name)  # type: ignore[attr-defined]
        return style

    @property
    def content_width(self) -> int:
        """The width lines are drawn to (``scrollable_content_region``'s, once a pass)."""
        if self._pass_style is None:
            return self.scrollable_content_region.width  # type: ignore[attr-defined,no-any-return]
        if self._pass_width is None:
            self._pass_width = self.scrollable_content_region.width  # type: ignore[attr-defined]
        return self._pass_width

    @property
    def base_style(self) -> Style:
        """The widget's ``rich_style``: the one of this drawing pass while one is under way."""
        style = self._pass_style
        return style if style is not None else self.rich_style  # type: ignore[attr-defined]
