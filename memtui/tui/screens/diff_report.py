"""Diff: live memory by call site and segments by pool, between two moments or files.

In the explorer it compares the event under the cursor with the end of the trace (a
call-site row then leads to that site's allocations); ``memtui diff A B --tui`` shows a
diff of two files, where rows lead nowhere.
"""

from __future__ import annotations

from collections.abc import Callable

from memtui.analysis.diff import MemoryDiff
from memtui.commands._report import signed_bytes
from memtui.tui.analysis_jumps import site_jump
from memtui.tui.device_view import DeviceView
from memtui.tui.locations import site_location
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
from memtui.units import format_bytes


class DiffReportScreen(AnalysisScreen):
    TITLE_TEXT = "Diff"
    COLUMNS = ("change", "A", "B", "count", "status", "call site")

    def __init__(self, make_diff: Callable[[], MemoryDiff], view: DeviceView | None = None, depth: int = 1) -> None:
        super().__init__()
        self.make_diff = make_diff
        self.view = view
        self.depth = depth
        if view is None:
            self.HINT = "Esc: close"

    def compute(self) -> MemoryDiff:
        return self.make_diff()

    def present(self, result: MemoryDiff) -> tuple[str, list[Row]]:
        f = format_bytes
        a, b = result.a, result.b
        lines = [f"A: {a.name}", f"B: {b.name}",
                 f"reserved {f(a.reserved)} -> {f(b.reserved)} ({signed_bytes(b.reserved - a.reserved)}),"
                 f" allocated {f(a.allocated)} -> {f(b.allocated)} ({signed_bytes(b.allocated - a.allocated)})"]
        for p in result.pools:
            lines.append(f"  {p.pool}: {p.a.segments} -> {p.b.segments} segments, reserved {f(p.a.reserved)} ->"
                         f" {f(p.b.reserved)}, allocated {f(p.a.allocated)} -> {f(p.b.allocated)}")
        lines.append(f"{len(result.new)} new and {len(result.gone)} gone call sites")
        rows: list[Row] = []
        for s in result.sites:
            if s.status == "same":
                continue
            jump = site_jump(self.view.snapshot, self.view.device, s.site, self.depth) if self.view else None
            rows.append(((signed_bytes(s.delta_bytes), f(s.bytes_a), f(s.bytes_b), f"{s.count_a} -> {s.count_b}",
                          s.status, site_location(s.site, s.frames)), jump))
        return "\n".join(lines), rows
