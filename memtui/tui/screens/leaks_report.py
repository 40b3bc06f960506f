"""Leaks: live memory by call site, the sites that grew step after step first."""

from __future__ import annotations

from memtui.analysis.leaks import LeakReport
from memtui.report.leaks import growth_summary, leaks_report
from memtui.services.leaks import LeaksOptions, leaks
from memtui.tui.screens.analysis_base import SITE_HINT, AnalysisScreen, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import site_jump
from memtui.tui.views.device_view import DeviceView

SITES_LISTED = 30


class LeaksReportScreen(AnalysisScreen):
    TITLE_TEXT = "Leaks and growth by call site"
    # As the command's table: the growth column names the kind (steady, rising, plateau...).
    COLUMNS = ("", "live bytes", "count", "over the run", "growth", "call site")
    HINT = SITE_HINT

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth

    def compute(self) -> LeakReport:
        # More call sites than the command prints by default: the table scrolls.
        options = LeaksOptions(device=self.view.device.device, depth=self.depth, top=SITES_LISTED)
        return leaks(self.view.snapshot, options).leaks

    def present(self, result: LeakReport) -> tuple[str, list[Row]]:
        report = leaks_report(result)
        rows: list[Row] = []
        for table in (report.table("growing"), report.table("sites")):  # every site, growing ones first
            cells = table_cells(table, ("growing", "bytes", "count", "trend", "kind", "site"))
            for shown, record in zip(cells, table.records()):
                rows.append((shown, site_jump(self.view.snapshot, self.view.device, record["site"].label, self.depth)))
        # The table lists the call sites: the text says which grew.
        return sections_text(report, skip=("growing", "sites")) + "\n" + growth_summary(result), rows
