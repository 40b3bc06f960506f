"""What the analysis screens share: computing in a worker, a report, a table of rows.

A subclass says how to compute its analysis (in a thread: it may take a moment on a big
trace) and how to present the result: the text of its report's sections (memtui.report)
and rows from the report's tables, each with the :class:`AnalysisJump` that Enter on it
returns to the explorer (None: the row leads nowhere). The screen is dismissed with the
chosen jump. Nothing here reads the commands' printed text.

The report and the table scroll as one page, so every line of the report is reachable on
a small terminal: Down, PgDn and End read on through the report into the table, Home
goes back to its top, and the table's cursor follows once its rows are in view. The last
column (a call site, a file) takes the width the others leave and prints short (see
memtui/tui/views/locations.py); the line under the table shows the highlighted row's location
in full.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Region
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from memtui.errors import MemtuiError
from memtui.report.format import cell_text
from memtui.report.sections import Place, Report, Table
from memtui.report.text import text_lines
from memtui.tui.messages import AnalysisComputed, AnalysisFailed
from memtui.tui.views.analysis_jumps import AnalysisJump
from memtui.tui.views.locations import Location, fit_location, site_location
from memtui.tui.workers import thread_work

Cell = str | Location
Row = tuple[tuple[Cell, ...], AnalysisJump | None]
LAST_MIN = 12  # the last column never gets narrower than this; the table scrolls sideways instead
TINY_HEIGHT = 16  # terminal rows below which the hint line gives its rows to the page
# The hint of a screen whose rows are call sites: Enter lists the site's allocations in the log.
SITE_HINT = "Enter: the site's allocations in the event log (n/N step through them) · Esc: close"


def sections_text(report: Report, skip: Collection[str] = ()) -> str:
    """The report's sections above the table, but those in ``skip`` (the tables the screen
    lists as rows, or leaves out)."""
    return "\n".join(text_lines(report, skip))


def table_cells(table: Table, keys: Sequence[str | None]) -> list[tuple[Cell, ...]]:
    """Per row of ``table``, the cells of the columns ``keys`` (None: an empty cell), each as
    its column's kind says; a call site keeps its frames, for its short form."""
    picked = [None if key is None else table.index(key) for key in keys]
    out = []
    for row in table.rows:
        cells: list[Cell] = []
        for k in picked:
            value = None if k is None else row[k]
            cells.append(site_location(value.label, value.frames) if isinstance(value, Place)
                          else "" if k is None else cell_text(table.columns[k], value))
        out.append(tuple(cells))
    return out


class ReportTable(DataTable):
    """The table of an analysis screen, scrolled with the report above it as one page."""

    BINDINGS = [
        Binding("up,k", "cursor_up", "Cursor up", show=False),
        Binding("down,j", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_top", "Top", show=False),
        Binding("end", "scroll_bottom", "Bottom", show=False),
    ]
    DEFAULT_CSS = """
    ReportTable {
        height: auto;
        overflow-y: hidden;
    }
    """

    @property
    def page(self) -> VerticalScroll:
        return self.screen.query_one("#analysis-body", VerticalScroll)

    def _row_y(self, row: int) -> int:
        """Where ``row`` is in the page (the page's virtual lines)."""
        return self.virtual_region.y + (self.header_height if self.show_header else 0) + row

    def _visible(self) -> tuple[int, int]:
        page = self.page
        top = round(page.scroll_y)
        return top, top + page.scrollable_content_region.height

    def _row_shown(self, row: int) -> bool:
        top, bottom = self._visible()
        return top <= self._row_y(row) < bottom

    def _rows_shown(self) -> tuple[int, int] | None:
        """First and last row in view, or None."""
        if not self.row_count:
            return None
        top, bottom = self._visible()
        first = max(0, top - self._row_y(0))
        last = min(self.row_count - 1, bottom - 1 - self._row_y(0))
        return (first, last) if first <= last else None

    def follow_cursor(self) -> None:
        if self.row_count:
            self.page.scroll_to_region(Region(0, self._row_y(self.cursor_row), 1, 1), animate=False, immediate=True)

    def _move(self, row: int) -> None:
        self.move_cursor(row=max(0, min(row, self.row_count - 1)), scroll=False)
        self.follow_cursor()

    def action_cursor_down(self) -> None:
        page = self.page
        if not self.row_count or (self._row_y(self.cursor_row) >= self._visible()[1]):
            page.scroll_relative(y=1, animate=False, immediate=True)  # still reading the report
        elif self.cursor_row < self.row_count - 1:
            self._move(self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        page = self.page
        if self.row_count and self.cursor_row > 0 and self._row_shown(self.cursor_row):
            self._move(self.cursor_row - 1)
        else:
            page.scroll_relative(y=-1, animate=False, immediate=True)  # back up into the report

    def action_page_down(self) -> None:
        page = self.page
        height = max(1, page.scrollable_content_region.height - 1)
        if page.scroll_y >= page.max_scroll_y and self.row_count:
            self._move(self.row_count - 1)
            return
        page.scroll_relative(y=height, animate=False, immediate=True)
        shown = self._rows_shown()
        if shown is not None and not shown[0] <= self.cursor_row <= shown[1]:
            self.move_cursor(row=shown[0], scroll=False)

    def action_page_up(self) -> None:
        page = self.page
        height = max(1, page.scrollable_content_region.height - 1)
        if page.scroll_y <= 0 and self.row_count:
            self._move(0)
            page.scroll_home(animate=False, immediate=True)
            return
        page.scroll_relative(y=-height, animate=False, immediate=True)
        shown = self._rows_shown()
        if shown is not None and not shown[0] <= self.cursor_row <= shown[1]:
            self.move_cursor(row=shown[1], scroll=False)

    def action_scroll_top(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, scroll=False)
        self.page.scroll_home(animate=False, immediate=True)

    def action_scroll_bottom(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, scroll=False)
        self.page.scroll_end(animate=False, immediate=True)


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
    AnalysisScreen #analysis-body {
        height: 1fr;
        scrollbar-gutter: stable;  /* the table's width does not change when the page starts to scroll */
    }
    AnalysisScreen #analysis-report {
        height: auto;
        margin-bottom: 1;
    }
    AnalysisScreen #analysis-detail {
        width: 100%;
        height: auto;
        min-height: 1;
        max-height: 3;
    }
    AnalysisScreen #analysis-hint {
        width: 100%;
        color: $text-muted;
    }
    """
    TITLE_TEXT = "Analysis"
    COLUMNS: tuple[str, ...] = ()
    HINT = "Enter: go to the event · Esc: close"

    def __init__(self) -> None:
        super().__init__()
        self.result: object = None
        self.jumps: list[AnalysisJump | None] = []
        self.rows: list[tuple[Cell, ...]] = []
        self._drawn_width = -1  # the last column's width the rows were drawn for

    def compose(self) -> ComposeResult:
        with Vertical(id="analysis-box"):
            with VerticalScroll(id="analysis-body", can_focus=False):
                yield Static("computing…", id="analysis-report")
                yield ReportTable(id="analysis-table", cursor_type="row", zebra_stripes=True)
            yield Label("", id="analysis-detail")
            yield Label(self.HINT, id="analysis-hint")

    @property
    def table(self) -> ReportTable:
        return self.query_one(ReportTable)

    def on_mount(self) -> None:
        self.query_one("#analysis-box").border_title = self.TITLE_TEXT
        self.set_focus(self.table)  # from the start: keys typed while it computes scroll the report
        self._compute()

    @thread_work(exclusive=True, group="analysis", exit_on_error=False)
    def _compute(self) -> None:
        try:
            result = self.compute()
        except MemtuiError as exc:
            self.post_message(AnalysisFailed(exc.message))
            return
        except Exception as exc:  # a bug: say so on the screen rather than take the explorer down
            self.post_message(AnalysisFailed(f"the analysis failed ({type(exc).__name__}: {exc})"))
            return
        self.post_message(AnalysisComputed(result))

    def on_analysis_computed(self, message: AnalysisComputed) -> None:
        self.result = message.result
        report, rows = self.present(message.result)
        self.show_report(report)
        self.rows = [cells for cells, _jump in rows]
        self.jumps = [jump for _cells, jump in rows]
        self._fill_table()

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        self.show_report(message.message)

    def show_report(self, text: str) -> None:
        # Plain text: call-site labels hold brackets ("[C++]") that markup would eat.
        self.query_one("#analysis-report", Static).update(Text(text))

    # -- the table ----------------------------------------------------------------------
    def _column_widths(self) -> list[int]:
        """Widths of every column but the last: their longest cell or header."""
        widths = [len(name) for name in self.COLUMNS[:-1]]
        for cells in self.rows:
            for k, cell in enumerate(cells[:-1]):
                widths[k] = max(widths[k], len(str(cell)))
        return widths

    def _last_width(self) -> int:
        table = self.table
        available = self.query_one("#analysis-body").scrollable_content_region.width
        fixed = sum(w + 2 * table.cell_padding for w in self._column_widths())
        return max(LAST_MIN, available - fixed - 2 * table.cell_padding)

    def _fill_table(self) -> None:
        table = self.table
        row = table.cursor_row
        width = self._last_width()
        self._drawn_width = width
        table.clear(columns=True)
        for name, w in zip(self.COLUMNS, self._column_widths() + [width]):
            table.add_column(name, width=w)
        for cells in self.rows:
            *head, last = cells
            shown = last.fit(width) if isinstance(last, Location) else fit_location(str(last), width)
            table.add_row(*(Text(str(cell)) for cell in head), Text(shown), height=1)
        if self.rows:
            table.move_cursor(row=min(max(row, 0), len(self.rows) - 1), scroll=False)
        self._show_detail(table.cursor_row)

    def on_resize(self) -> None:
        # On a tiny terminal the page needs the rows more than the hint (the footer says Esc).
        self.query_one("#analysis-hint").display = self.size.height >= TINY_HEIGHT
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        if self.rows and self._last_width() != self._drawn_width:
            self._fill_table()

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        self._show_detail(message.cursor_row)

    def _show_detail(self, row: int) -> None:
        """The highlighted row's last cell in full: a call site with its file's whole path."""
        text = ""
        if 0 <= row < len(self.rows):
            last = self.rows[row][-1]
            if isinstance(last, Location) and last.full:
                text = last.full
            elif len(str(last)) > self._drawn_width:
                text = str(last)
        self.query_one("#analysis-detail", Label).update(Text(text))

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
