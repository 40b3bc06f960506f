"""The filter input that `\\` opens at the bottom of the main screen.

It checks the text as it is typed (parsing is microseconds) and reports the first
error with its column, so a filter is only applied once it reads; Enter applies it,
Escape clears the filter and closes the bar. Like the search bar, it moves the focus at
once when it opens and closes (:mod:`memtui.tui.widgets.input_bar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from memtui.tui.widgets.input_bar import InputBar

# The filter language is imported when a filter is first typed (15 ms of the explorer's start).
if TYPE_CHECKING:
    from memtui.query import FilterError

PLACEHOLDER = "filter, e.g. size>1MiB file:train.py leaked · action:oom or -freed · Enter applies, Esc clears"


class FilterBar(InputBar):
    """One-line filter expression; hidden while not in use."""

    DEFAULT_CSS = """
    FilterBar {
        border: none;
        &.-invalid { color: $warning; }
    }
    """
    BINDINGS = [Binding("escape", "clear", "Clear filter")]

    @dataclass
    class Apply(Message):
        """Enter on a filter that parses."""

        text: str

    @dataclass
    class Checked(Message):
        """The text changed: ``error`` is None when it parses."""

        text: str
        error: FilterError | None

    class Cleared(Message):
        """Escape: drop the filter."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(PLACEHOLDER, id=id)

    @staticmethod
    def check(text: str) -> FilterError | None:
        from memtui.query import FilterError, compile_filter

        try:
            compile_filter(text)
        except FilterError as exc:
            return exc
        return None

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        error = self.check(self.value)
        self.set_class(error is not None, "-invalid")
        self.post_message(self.Checked(self.value, error))

    def action_clear(self) -> None:
        self.close()
        self.post_message(self.Cleared())

    async def action_submit(self) -> None:
        text = self.value
        error = self.check(text)
        if error is not None:
            # Stay open on the mistake; the screen shows where it is.
            self.post_message(self.Checked(text, error))
            return
        self.close()
        self.post_message(self.Apply(text.strip()))
