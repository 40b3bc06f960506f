"""The search input that `/` opens at the bottom of the main screen."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
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

    def open(self) -> None:
        self.add_class("-open")
        self.value = ""
        self.focus()

    def action_close(self) -> None:
        self.remove_class("-open")
        self.post_message(self.Closed())

    async def action_submit(self) -> None:
        query = self.value
        self.remove_class("-open")
        if query.strip():
            self.post_message(self.Search(query))
        else:
            self.post_message(self.Closed())
