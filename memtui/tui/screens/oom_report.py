"""Why OOM: the diagnosis of every OOM of the device, and who held the memory."""

from __future__ import annotations

from memtui.analysis.oom import OomDiagnosis, diagnose_ooms
from memtui.commands.oom import render
from memtui.tui.analysis_jumps import event_jump, site_jump
from memtui.tui.device_view import DeviceView
from memtui.tui.locations import site_location
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
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

    def compute(self) -> list[OomDiagnosis]:
        return diagnose_ooms(self.view.snapshot, self.view.device.device, depth=self.depth)

    def present(self, result: list[OomDiagnosis]) -> tuple[str, list[Row]]:
        dev = self.view.device
        if not result:
            return f"device {dev.device}: no OOM in this trace", []
        report = "\n\n".join("\n".join(render(d, n, len(result), with_sites=False))
                             for n, d in enumerate(result, 1))
        rows: list[Row] = []
        for d in result:
            verdict = d.verdict + (", process limit" if d.process_limit else "")
            rows.append(((f"{d.index:,}", format_bytes(d.requested), "", f"OOM: {verdict}"), event_jump(d.index)))
            for site in d.top_sites:
                where = site_location(site["site"], site.get("frames"))
                rows.append((("", format_bytes(site["bytes"]), f"{site['count']:,}", where),
                             site_jump(self.view.snapshot, dev, site["site"], self.depth)))
        return report, rows
