"""The search input that `/` opens at the bottom of the main screen.

Opening and closing move the focus at once (``Screen.set_focus``, not ``Widget.focus``,
which waits for the app's queue): the keys typed right after ``/`` or after Enter then
go where the user expects (memtui/tui/key_order.py delivers them one at a time).
"""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

PLACEHOLDER = "address_n (7f06..00_0, b/s/0x prefixes), a hex address, or text in frame files/functions"


class SearchBar(Input):
    """One-line query; Enter searches, Escape closes. Hidden while not in use."""

    DEFAULT_CSS = """
    SearchBar {
        display: none;
        height: 1;
        padding: 0 1;
        &.-open { display: block; }
    }
    """
    BINDINGS = [Binding("escape", "close", "Close search")]

    class Search(Message):
        """The user asked to search for ``query``."""

        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    class Closed(Message):
        """The bar closed without a search."""

    def __init__(self, *, id: str | None = None) -> None:
        # Compact: without it the focused Input draws a tall border that a 1-line bar cannot hold.
        super().__init__(placeholder=PLACEHOLDER, id=id, compact=True)
        self._return_focus: Widget | None = None

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self) -> None:
        if not self.is_open:
            self._return_focus = self.screen.focused
        self.add_class("-open")
        self.value = ""
        self.screen.set_focus(self)

    def _close(self) -> None:
        self.remove_class("-open")
        back = self._return_focus if self._return_focus is not None and self._return_focus.is_attached else None
        self.screen.set_focus(back)
        self._return_focus = None

    def action_close(self) -> None:
        self._close()
        self.post_message(self.Closed())

    async def action_submit(self) -> None:
        query = self.value
        self._close()
        if query.strip():
            self.post_message(self.Search(query))
        else:
            self.post_message(self.Closed())
