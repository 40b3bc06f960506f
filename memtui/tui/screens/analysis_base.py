"""What the analysis screens share: computing in a worker, a report, a table of rows.

A subclass says how to compute its analysis (in a thread: it may take a moment on a big
trace) and how to present the result: a text report and rows, each with the
:class:`AnalysisJump` that Enter on it returns to the explorer (None: the row leads
nowhere). The screen is dismissed with the chosen jump.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from memtui.errors import MemtuiError
from memtui.tui.analysis_jumps import AnalysisJump

Row = tuple[tuple[str, ...], AnalysisJump | None]


class AnalysisScreen(ModalScreen[AnalysisJump | None]):
    BINDINGS = [Binding("escape,q", "close", "Close")]
    DEFAULT_CSS = """
    AnalysisScreen {
        align: center middle;
    }
    AnalysisScreen #analysis-box {
        width: 96%;
        height: 90%;
        border: round $accent;
        border-title-color: $accent;
        padding: 0 1;
        background: $surface;
    }
    AnalysisScreen #analysis-report {
        height: auto;
        max-height: 45%;
        overflow-y: auto;
        margin-bottom: 1;
    }
    AnalysisScreen #analysis-table {
        height: 1fr;
    }
    AnalysisScreen #analysis-hint {
        color: $text-muted;
    }
    """
    TITLE_TEXT = "Analysis"
    COLUMNS: tuple[str, ...] = ()
    HINT = "Enter: go to the event · Esc: close"

    class Computed(Message):
        def __init__(self, result: object) -> None:
            super().__init__()
            self.result = result

    class Failed(Message):
        def __init__(self, message: str) -> None:
            super().__init__()
            self.message = message

    def __init__(self) -> None:
        super().__init__()
        self.result: object = None
        self.jumps: list[AnalysisJump | None] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="analysis-box"):
            yield Static("computing…", id="analysis-report")
            yield DataTable(id="analysis-table", cursor_type="row", zebra_stripes=True)
            yield Label(self.HINT, id="analysis-hint")

    def on_mount(self) -> None:
        self.query_one("#analysis-box").border_title = self.TITLE_TEXT
        self.query_one(DataTable).add_columns(*self.COLUMNS)
        self._compute()

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def _compute(self) -> None:
        try:
            result = self.compute()
        except MemtuiError as exc:
            self.post_message(self.Failed(exc.message))
            return
        except Exception as exc:  # a bug: say so on the screen rather than take the explorer down
            self.post_message(self.Failed(f"the analysis failed ({type(exc).__name__}: {exc})"))
            return
        self.post_message(self.Computed(result))

    def on_analysis_screen_computed(self, message: Computed) -> None:
        self.result = message.result
        report, rows = self.present(message.result)
        self.show_report(report)
        table = self.query_one(DataTable)
        table.clear()
        self.jumps = []
        for cells, jump in rows:
            table.add_row(*(Text(cell) for cell in cells))
            self.jumps.append(jump)
        table.focus()

    def on_analysis_screen_failed(self, message: Failed) -> None:
        self.show_report(message.message)

    def show_report(self, text: str) -> None:
        # Plain text: call-site labels hold brackets ("[C++]") that markup would eat.
        self.query_one("#analysis-report", Static).update(Text(text))

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        row = message.cursor_row
        jump = self.jumps[row] if 0 <= row < len(self.jumps) else None
        if jump is None:
            self.notify("this row has no event to go to", severity="warning")
            return
        if jump.event is None:
            self.notify(jump.message, severity="warning")
            return
        self.dismiss(jump)

    def action_close(self) -> None:
        self.dismiss(None)

    # -- for subclasses -------------------------------------------------------------
    def compute(self) -> object:
        raise NotImplementedError

    def present(self, result: object) -> tuple[str, list[Row]]:
        raise NotImplementedError
