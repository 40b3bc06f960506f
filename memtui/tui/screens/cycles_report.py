"""Cycles: the call sites the garbage collector freed, and every burst of frees with its cause."""

from __future__ import annotations

from memtui.analysis.cycles import CycleReport
from memtui.report.cycles import burst_how, cycles_report
from memtui.services.cycles import CyclesOptions, cycles
from memtui.tui.screens.analysis_base import AnalysisScreen, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import event_jump, site_jump
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.locations import Location, table_location


class CyclesReportScreen(AnalysisScreen):
    TITLE_TEXT = "Reference cycles"
    COLUMNS = ("event", "time", "freed", "lives", "peak before", "call site, or where a burst freed — how")
    HINT = "Enter on a burst: go to its first free · on a call site: its allocations, filtered · Esc: close"

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth

    def compute(self) -> CycleReport:
        return cycles(self.view.snapshot, CyclesOptions(device=self.view.device.device, depth=self.depth)).cycles

    def present(self, result: CycleReport) -> tuple[str, list[Row]]:
        report = cycles_report(result)
        snapshot, dev = self.view.snapshot, self.view.device
        rows: list[Row] = []
        sites = report.table("sites")
        for (_, *cells), place in zip(table_cells(sites, (None, None, "bytes", "lives", None, "site")),
                                      sites.values("site")):
            rows.append((("site", *cells), site_jump(snapshot, dev, place.label, self.depth)))
        # Every burst the report's tables hold: what the collector freed, then the bursts with
        # another cause (or none known), which the command lists as well.
        for key in ("bursts", "other_bursts"):
            bursts = report.table(key)
            for cells, burst in zip(table_cells(bursts, ("event", "time", "bytes", "lives", "before")),
                                    bursts.records()):
                rows.append(((*cells, self._freed_at(burst)), event_jump(burst["event"])))
        return sections_text(report, skip=("sites", "bursts", "other_bursts")), rows

    def _freed_at(self, burst: dict) -> Location:
        """Where the program was as the burst freed (the label frame of its first free), then
        how, as the command says it (memtui.report.cycles.burst_how)."""
        snapshot = self.view.snapshot
        sid = int(self.view.device.trace.stack[burst["event"]])
        where = table_location(snapshot.stacks.frames, int(snapshot.stacks.label[sid]) if sid >= 0 else -1)
        collected_at = burst["collected_at"]
        how = burst_how(burst["cause"], burst["confidence"], burst["order"])  # as the command words it
        if not where.short:
            where = Location(collected_at, collected_at)
        return Location(f"{where.short} — {how}", f"{collected_at} — {how}", where.keep)
