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
from memtui.commands.ranks import render_overview
from memtui.tui.analysis_jumps import AnalysisJump
from memtui.tui.locations import Location
from memtui.tui.messages import SummaryProgress
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
from memtui.units import format_bytes

ProgressFn = Callable[[int, int, int], None]  # done, total, failed
Summarize = Callable[[ProgressFn], list[dict]]
PROGRESS_INTERVAL = 0.1


class StopSummaries(Exception):
    """Raised in the progress callback once the screen is gone: stops the remaining files."""


def rank_rows(result: dict, groups: list[dict], own: str | None = None) -> list[Row]:
    """A row per rank; each leads to its file (the open one, ``own``, to its peak instead)."""
    group_of = {rank: i + 1 for i, g in enumerate(groups) for rank in g["ranks"]}
    rows: list[Row] = []
    for r in result["ranks"]:
        mark = f"outlier {group_of[r['rank']]}" if r["rank"] in group_of else ""
        name = os.path.basename(r["file"]) + ("  (open)" if r["file"] == own else "")
        jump = AnalysisJump(None, message=f"rank {r['rank']}: {r['file']}")
        rows.append(((str(r["rank"]), format_bytes(r["peak_allocated"]), format_bytes(r["peak_reserved"]),
                      str(r["ooms"]), f"{r['events']:,}", mark, Location(name, r["file"])), jump))
    return rows


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
        result = computed["result"]
        self.files = [r["file"] for r in result["ranks"]]
        report = render_overview(result, computed["groups"], computed["histogram"], self.moment, with_table=False)
        return "\n".join(report), rank_rows(result, computed["groups"])

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.prevent_default()  # not the base screen's jump: this list stays open
        row = message.cursor_row
        if 0 <= row < len(self.files):
            self.app.open_file(self.files[row])

    def action_close(self) -> None:
        self.workers.cancel_group(self, "analysis")
        self.dismiss(None)
