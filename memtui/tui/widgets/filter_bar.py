"""The filter input that `\\` opens at the bottom of the main screen.

It checks the text as it is typed (parsing is microseconds) and reports the first
error with its column, so a filter is only applied once it reads; Enter applies it,
Escape clears the filter and closes the bar. Like the search bar, it moves the focus at
once when it opens and closes, so keys typed right after land where they should.
"""

from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from memtui.query import FilterError, compile_filter

PLACEHOLDER = "filter, e.g. size>1MiB file:train.py leaked · action:oom or -freed · Enter applies, Esc clears"


class FilterBar(Input):
    """One-line filter expression; hidden while not in use."""

    DEFAULT_CSS = """
    FilterBar {
        display: none;
        border: none;
        height: 1;
        padding: 0 1;
        &.-open { display: block; }
        &.-invalid { color: $warning; }
    }
    """
    BINDINGS = [Binding("escape", "clear", "Clear filter")]

    class Apply(Message):
        """Enter on a filter that parses."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Checked(Message):
        """The text changed: ``error`` is None when it parses."""

        def __init__(self, text: str, error: FilterError | None) -> None:
            super().__init__()
            self.text = text
            self.error = error

    class Cleared(Message):
        """Escape: drop the filter."""

    def __init__(self, *, id: str | None = None) -> None:
        # Compact: a focused Input draws a tall border that hides the text of a 1-line bar.
        super().__init__(placeholder=PLACEHOLDER, id=id, compact=True)
        self._return_focus: Widget | None = None

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, text: str) -> None:
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

    @staticmethod
    def check(text: str) -> FilterError | None:
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
