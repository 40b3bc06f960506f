"""The `?` screen: every key with what it does, grouped by pane, and the segment map's legend."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from memtui.tui.views.filter_actions import FILTER_EXAMPLES
from memtui.tui.views.segment_rows import LEGEND

# Theme variables of the segment map's colours, by legend entry (SegmentMap.DEFAULT_CSS has the same).
_LEGEND_VARIABLES = {"allocated": "success", "pending free": "warning", "filter match": "primary-lighten-2",
                     "selected": "error"}


KeyReference = list[tuple[str, list[tuple[str, str]]]]


class HelpScreen(ModalScreen):
    """Every key of the explorer: the reference (memtui.tui.keys.key_reference) is handed in, so
    this screen imports neither the app nor the screens whose keys it lists."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close help")]

    def __init__(self, reference: KeyReference) -> None:
        super().__init__()
        self.reference = reference

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(self._table(self.app.get_css_variables()), id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "memtui keys"
        box.border_subtitle = "Esc closes"
        box.focus()

    def _table(self, colours: dict[str, str] | None = None) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", no_wrap=True)
        table.add_column()
        for k, (section, rows) in enumerate(self.reference):
            if k:
                table.add_row("", "")
            table.add_row("", Text(section, style="bold underline"))
            for keys, what in rows:
                table.add_row(Text(keys, style="bold"), what)
            if section == "Segment map":
                _legend_rows(table, colours or {})
        table.add_row("", "")
        table.add_row("", Text("Filter examples (\\ opens the filter bar)", style="bold underline"))
        for example, what in FILTER_EXAMPLES:
            table.add_row(Text(example, style="bold"), what)
        return table


def _legend_rows(table: Table, colours: dict[str, str]) -> None:
    """The map's legend: each glyph in its colour (the theme's), with what it means."""
    table.add_row("", "")
    table.add_row("", Text("Segment map legend (a cell is a range of the segment's bytes)", style="italic"))
    for chars, _kind, word, meaning in LEGEND:
        colour = colours.get(_LEGEND_VARIABLES.get(word, ""), "")
        style = f"bold {colour}" if colour.startswith("#") else "bold"  # "auto 60%" is no Rich colour
        table.add_row(Text(chars, style=style), f"{word}: {meaning}")
