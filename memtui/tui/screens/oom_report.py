"""Why OOM: the diagnosis of every OOM of the device, and who held the memory."""

from __future__ import annotations

from memtui.services.oom import OomOptions, OomResult, oom
from memtui.tui.screens.analysis_base import AnalysisScreen, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import event_jump, site_jump
from memtui.tui.views.device_view import DeviceView
from memtui.units import format_bytes


class OomReportScreen(AnalysisScreen):
    TITLE_TEXT = "Why OOM"
    # One row per OOM (its request and verdict), then the call sites holding memory at it.
    COLUMNS = ("event", "bytes", "count", "OOM verdict, or call site")
    HINT = "Enter on an OOM: go to it · on a call site: its allocations, filtered · Esc: close"

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth

    def compute(self) -> OomResult:
        return oom(self.view.snapshot, OomOptions(device=self.view.device.device, depth=self.depth))

    def present(self, result: OomResult) -> tuple[str, list[Row]]:
        dev = self.view.device
        report = result.report()  # the command's own text: a filtered export's OOMs say why they are not explained
        rows: list[Row] = []
        for d, sites in zip(result.ooms, report.tables("sites")):
            verdict = d.verdict + (", process limit" if d.process_limit else "")
            rows.append(((f"{d.index:,}", format_bytes(d.requested), "", f"OOM: {verdict}"), event_jump(d.index)))
            for cells, place in zip(table_cells(sites, (None, "bytes", "count", "site")), sites.values("site")):
                rows.append((cells, site_jump(self.view.snapshot, dev, place.label, self.depth)))
        # The table lists each OOM's call sites: the text leaves them out, and the largest allocations.
        return sections_text(report, skip=("sites", "largest")), rows
