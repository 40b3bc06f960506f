"""A one-line input at the bottom of the main screen, hidden while not in use: the search
bar (`/`) and the filter bar (`\\`).

Opening and closing move the focus at once (``Screen.set_focus``, not ``Widget.focus``,
which waits for the app's queue): the keys typed right after ``/`` or after Enter then
go where the user expects (memtui/tui/key_order.py delivers them one at a time). Closing
gives the focus back to the pane the bar was opened from.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Input


class InputBar(Input):
    DEFAULT_CSS = """
    InputBar {
        display: none;
        height: 1;
        padding: 0 1;
        &.-open { display: block; }
    }
    """

    def __init__(self, placeholder: str, *, id: str | None = None) -> None:
        # Compact: without it the focused Input draws a tall border that a 1-line bar cannot hold.
        super().__init__(placeholder=placeholder, id=id, compact=True)
        self._return_focus: Widget | None = None

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, text: str = "") -> None:
        if not self.is_open:
            self._return_focus = self.screen.focused
        self.add_class("-open")
        self.value = text
        self.cursor_position = len(text)
        self.screen.set_focus(self)

    def close(self) -> None:
        was_open = self.is_open
        self.remove_class("-open")
        if was_open and self.screen.focused is self:
            back = self._return_focus
            self.screen.set_focus(back if back is not None and back.is_attached else None)
        self._return_focus = None
