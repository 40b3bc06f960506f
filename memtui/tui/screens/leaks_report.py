"""Leaks: live memory by call site, the sites that grew step after step first."""

from __future__ import annotations

from memtui.analysis.leaks import LeakReport
from memtui.report.leaks import leaks_report
from memtui.services.leaks import LeaksOptions, leaks
from memtui.tui.screens.analysis_base import SITE_HINT, AnalysisScreen, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import site_jump
from memtui.tui.views.device_view import DeviceView

SITES_LISTED = 30


class LeaksReportScreen(AnalysisScreen):
    TITLE_TEXT = "Leaks and growth by call site"
    COLUMNS = ("", "live bytes", "count", "growth", "over the run", "call site")
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
        growing = report.table("growing")
        names = [place.label for place in growing.values("site")]
        summary = (f"{len(names)} call site(s) grew steadily (marked ▲): {', '.join(names)}" if names else
                   "no call site grew steadily over the run")
        rows: list[Row] = []
        for table in (growing, report.table("sites")):  # every site, growing ones first
            cells = table_cells(table, ("growing", "bytes", "count", "growth", "trend", "site"))
            for (mark, size, count, growth, trend, where), record in zip(cells, table.records()):
                shown = (mark, size, count, growth if record["growth"] else "", trend, where)
                rows.append((shown, site_jump(self.view.snapshot, self.view.device, record["site"].label, self.depth)))
        # The table lists the call sites: the text says which grew.
        return sections_text(report, skip=("growing", "sites")) + "\n" + summary, rows
