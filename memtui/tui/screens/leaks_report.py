"""Leaks: live memory by call site, the sites that grew step after step first."""

from __future__ import annotations

from memtui.analysis.leaks import LeakReport, find_leaks
from memtui.commands._report import signed_bytes
from memtui.commands.leaks import because_lines, describe_points, headline, sparkline
from memtui.tui.analysis_jumps import site_jump
from memtui.tui.device_view import DeviceView
from memtui.tui.locations import site_location
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
from memtui.units import format_bytes


class LeaksReportScreen(AnalysisScreen):
    TITLE_TEXT = "Leaks and growth by call site"
    COLUMNS = ("", "live bytes", "count", "growth", "over the run", "call site")
    HINT = "Enter: the site's allocations in the event log (n/N step through them) · Esc: close"

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth

    def compute(self) -> LeakReport:
        return find_leaks(self.view.snapshot, self.view.device, self.depth)

    def present(self, result: LeakReport) -> tuple[str, list[Row]]:
        growing = result.growing
        lines = [headline(result)] + because_lines(result)
        lines.append(f"{format_bytes(result.live_bytes)} in {result.live_count:,} live allocations at snapshot time;"
                     f" {describe_points(result)}")
        if growing:
            names = ", ".join(s.label for s in growing)
            lines.append(f"{len(growing)} call site(s) grew steadily (marked ▲): {names}")
        else:
            lines.append("no call site grew steadily over the run")
        rows: list[Row] = []
        for s in result.sites:
            cells = ("▲" if s.growing else "", format_bytes(s.bytes), f"{s.count:,}",
                     signed_bytes(s.growth_bytes) if s.growth_bytes else "", sparkline(s.series_bytes),
                     site_location(s.label, s.frames))
            rows.append((cells, site_jump(self.view.snapshot, self.view.device, s.label, self.depth)))
        return "\n".join(lines), rows
