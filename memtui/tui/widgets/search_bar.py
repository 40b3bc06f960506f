"""The search input that `/` opens at the bottom of the main screen (see
:mod:`memtui.tui.widgets.input_bar` for how it moves the focus)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.message import Message

from memtui.tui.widgets.input_bar import InputBar

PLACEHOLDER = "address_n (7f06..00_0, b/s/0x prefixes), a hex address, or text in frame files/functions"


class SearchBar(InputBar):
    """One-line query; Enter searches, Escape closes. Hidden while not in use."""

    BINDINGS = [Binding("escape", "close", "Close search")]

    @dataclass
    class Search(Message):
        """The user asked to search for ``query``."""

        query: str

    class Closed(Message):
        """The bar closed without a search."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(PLACEHOLDER, id=id)

    def action_close(self) -> None:
        self.close()
        self.post_message(self.Closed())

    async def action_submit(self) -> None:
        query = self.value
        self.close()
        if query.strip():
            self.post_message(self.Search(query))
        else:
            self.post_message(self.Closed())
