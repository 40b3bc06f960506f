"""Ranks from their summaries alone: the comparison, the histogram, the groups, a row per rank.

Nothing here opens a snapshot until Enter asks for one, so thousands of ranks whose
summaries are cached open in seconds. Summaries are computed (or read) in a worker
thread that reports progress; closing the screen stops it between files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from textual.widgets import DataTable
from textual.worker import get_current_worker

from memtui.analysis.rank_overview import group_outliers, peak_histogram
from memtui.analysis.ranks import compare_ranks
from memtui.report.ranks import FULL_TABLE_RANKS, rank_table, ranks_report
from memtui.report.sections import Table
from memtui.tui.messages import SummaryProgress
from memtui.tui.screens.analysis_base import AnalysisScreen, Cell, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import AnalysisJump
from memtui.tui.views.locations import Location

ProgressFn = Callable[[int, int, int], None]  # done, total, failed
Summarize = Callable[[ProgressFn], list[dict]]
PROGRESS_INTERVAL = 0.1


class StopSummaries(Exception):
    """Raised in the progress callback once the screen is gone: stops the remaining files."""


def rank_cells(table: Table, mark: str, own: str | None = None) -> list[tuple[Cell, ...]]:
    """A rank table's rows as the ranks screens show them: ``mark`` names the column that
    sets a rank apart; the file by its name, the open one (``own``) marked."""
    cells = table_cells(table, ("rank", "peak_allocated", "peak_reserved", "ooms", "events", mark))
    return [(*row, Location(os.path.basename(p.label) + ("  (open)" if p.label == own else ""), p.label))
            for row, p in zip(cells, table.values("file"))]


class RankListScreen(AnalysisScreen):
    """The ranks of a whole job; Enter opens a rank's snapshot over this list (q comes back)."""

    TITLE_TEXT = "Ranks"
    COLUMNS = ("rank", "peak allocated", "peak reserved", "OOMs", "events", "group", "file")
    HINT = "Enter: open the rank's snapshot (q there comes back here) · Esc: quit"

    def __init__(self, summarize: Summarize, moment: str = "peak") -> None:
        super().__init__()
        self.summarize = summarize
        self.moment = moment
        self.files: list[str] = []

    def compute(self) -> dict:
        worker = get_current_worker()
        last = [0.0]

        def progress(done: int, total: int, failed: int) -> None:
            if worker.is_cancelled:
                raise StopSummaries
            now = time.monotonic()
            if now - last[0] >= PROGRESS_INTERVAL or done >= total:
                last[0] = now
                self.post_message(SummaryProgress(done, total, failed))

        result = compare_ranks(self.summarize(progress), self.moment)
        return {"result": result, "groups": group_outliers(result), "histogram": peak_histogram(result)}

    def on_summary_progress(self, message: SummaryProgress) -> None:
        if self.result is None:
            failures = f", {message.failed:,} failed" if message.failed else ""
            self.show_report(f"summarising: {message.done:,} of {message.total:,} files{failures}")

    def present(self, computed: dict) -> tuple[str, list[Row]]:
        result, groups = computed["result"], computed["groups"]
        self.files = [r["file"] for r in result["ranks"]]
        # The text: the outliers, the histogram and the groups; every rank is a row of the table.
        report = ranks_report(result, self.moment, groups, computed["histogram"], limit=FULL_TABLE_RANKS)
        rows = [(cells, AnalysisJump(None, message=f"rank {r['rank']}: {r['file']}"))
                for cells, r in zip(rank_cells(rank_table(result["ranks"], groups), "group"), result["ranks"])]
        return sections_text(report, skip=("ranks",)), rows

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.prevent_default()  # not the base screen's jump: this list stays open
        row = message.cursor_row
        if 0 <= row < len(self.files):
            self.app.open_file(self.files[row])

    def action_close(self) -> None:
        self.workers.cancel_group(self, "analysis")
        self.dismiss(None)
