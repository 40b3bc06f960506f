"""Cycles: bursts of frees that only the garbage collector explains."""

from __future__ import annotations

from memtui.analysis.cycles import CycleReport, find_cycles
from memtui.commands.cycles import because_lines, headline
from memtui.tui.analysis_jumps import event_jump, site_jump
from memtui.tui.device_view import DeviceView
from memtui.tui.locations import Location, site_location, table_location
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
from memtui.units import format_bytes, format_seconds


class CyclesReportScreen(AnalysisScreen):
    TITLE_TEXT = "Reference cycles"
    COLUMNS = ("event", "time", "freed", "lives", "peak before", "call site, or where the collector ran")
    HINT = "Enter on a burst: go to its first free · on a call site: its allocations, filtered · Esc: close"

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth

    def compute(self) -> CycleReport:
        return find_cycles(self.view.snapshot, self.view.device, self.depth)

    def present(self, result: CycleReport) -> tuple[str, list[Row]]:
        report = "\n".join([headline(result)] + because_lines(result))
        rows: list[Row] = []
        for s in result.sites:
            rows.append((("site", "", format_bytes(s.bytes), f"{s.lives:,}", "", site_location(s.site, s.frames)),
                         site_jump(self.view.snapshot, self.view.device, s.site, self.depth)))
        for b in result.bursts:
            rows.append(((f"{b.index:,}", format_seconds(result.seconds_into_trace(b)), format_bytes(b.bytes),
                          f"{b.lives:,}", format_bytes(b.allocated_before),
                          self._collected_at(b)), event_jump(b.index)))
        if result.suspected:
            report += "\n\nCall torch.utils.viz._cycles.warn_tensor_cycles() early to be told which objects form them."
        return report, rows

    def _collected_at(self, burst) -> Location:
        """Where the collector ran (the label frame of the burst's first free), then the free order."""
        snapshot = self.view.snapshot
        sid = int(self.view.device.trace.stack[burst.index])
        where = table_location(snapshot.stacks.frames, int(snapshot.stacks.label[sid]) if sid >= 0 else -1)
        if not where.short:
            where = Location(burst.collected_at, burst.collected_at)
        return Location(f"{where.short} ({burst.order})", f"{burst.collected_at} ({burst.order})", where.keep)
