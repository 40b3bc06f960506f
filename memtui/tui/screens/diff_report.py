"""Diff: live memory by call site and segments by pool, between two moments or files.

In the explorer it compares the event under the cursor with the end of the trace (a
call-site row then leads to that site's allocations); ``memtui diff A B --tui`` shows a
diff of two files, where rows lead nowhere.
"""

from __future__ import annotations

from collections.abc import Callable

from memtui.analysis.diff import MemoryDiff
from memtui.report.diff import diff_report
from memtui.report.format import signed_bytes
from memtui.tui.screens.analysis_base import SITE_HINT, AnalysisScreen, Row, table_cells
from memtui.tui.views.analysis_jumps import site_jump
from memtui.tui.views.device_view import DeviceView
from memtui.units import format_bytes


class DiffReportScreen(AnalysisScreen):
    TITLE_TEXT = "Diff"
    COLUMNS = ("change", "A", "B", "count", "status", "call site")

    def __init__(self, make_diff: Callable[[], MemoryDiff], view: DeviceView | None = None, depth: int = 1) -> None:
        super().__init__()
        self.make_diff = make_diff
        self.view = view
        self.depth = depth
        # Enter on a row lists that call site's allocations in the log (analysis_jumps.site_jump).
        self.HINT = "Esc: close" if view is None else SITE_HINT

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
        sites = diff_report(result).table("sites")  # the changed call sites, all of them
        cells = table_cells(sites, ("change", "bytes_a", "bytes_b", None, "status", "site"))
        view = self.view
        for (change, size_a, size_b, _, status, where), site in zip(cells, sites.records()):
            jump = site_jump(view.snapshot, view.device, site["site"].label, self.depth) if view else None
            rows.append(((change, size_a, size_b, f"{site['count_a']} -> {site['count_b']}", status, where), jump))
        return "\n".join(lines), rows
