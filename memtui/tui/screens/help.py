"""The `?` screen: every key with what it does, grouped by pane."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from memtui.tui.filter_actions import FILTER_EXAMPLES
from memtui.tui.keys import key_reference


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close help")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(self._table(), id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "memtui keys"
        box.border_subtitle = "Esc closes"
        box.focus()

    @staticmethod
    def _table() -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", no_wrap=True)
        table.add_column()
        for k, (section, rows) in enumerate(key_reference()):
            if k:
                table.add_row("", "")
            table.add_row("", Text(section, style="bold underline"))
            for keys, what in rows:
                table.add_row(Text(keys, style="bold"), what)
        table.add_row("", "")
        table.add_row("", Text("Filter examples (\\ opens the filter bar)", style="bold underline"))
        for example, what in FILTER_EXAMPLES:
            table.add_row(Text(example, style="bold"), what)
        return table
