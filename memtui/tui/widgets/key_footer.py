"""Textual's footer, built again only when the keys it shows change.

Textual's footer makes a widget for every key it shows and builds them all again whenever
the screen's bindings may have changed: as a screen replaces another, as the focus moves,
after a refresh. When the explorer's first screen shows, that happened three times in a
row with the same keys, 150 ms of the thread that draws, and the first keys typed waited
behind it (a key 100-160 ms instead of 20-30). This footer keeps what it last built from
and builds again only when that differs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer


class KeyFooter(Footer):
    """A :class:`textual.widgets.Footer` that skips a rebuild with nothing new to show."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._built_from: tuple | None = None

    def _what_it_shows(self) -> tuple:
        """Everything Footer.compose reads: the screen's active bindings and the options."""
        app = self.app
        return (tuple(self.screen.active_bindings.items()), self.compact, self.show_command_palette,
                self.combine_groups, app.ENABLE_COMMAND_PALETTE, app.COMMAND_PALETTE_BINDING)

    def compose(self) -> ComposeResult:
        children: Iterable[Widget] = list(super().compose())
        # Nothing built (the bindings not ready yet): the next rebuild always runs.
        self._built_from = self._what_it_shows() if children else None
        yield from children

    async def recompose(self) -> None:
        if self._built_from is not None and self.is_attached and self._what_it_shows() == self._built_from:
            return
        await super().recompose()
