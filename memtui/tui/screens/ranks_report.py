"""Ranks: the open snapshot next to its sibling rank files (same name, other rank numbers).

Summaries are computed in worker processes, or read from the summary cache; the open
file's own summary comes from the snapshot already loaded. Enter on the open file's rank
goes to its peak, on another rank opens that rank's snapshot in its place.
"""

from __future__ import annotations

import os
import re

from textual.widgets import DataTable

from memtui.analysis.ranks import compare_ranks, rank_from_name, summarize_snapshot
from memtui.cache.summaries import default_summary_cache
from memtui.errors import UsageError
from memtui.fleet.rank_files import summarize_files
from memtui.report.ranks import ranks_report
from memtui.tui.screens.analysis_base import AnalysisScreen, Row, sections_text
from memtui.tui.screens.rank_list import rank_cells
from memtui.tui.views.analysis_jumps import AnalysisJump, event_jump
from memtui.tui.views.device_view import DeviceView

_RANK = re.compile(r"(rank[_\-.]?)(\d+)", re.IGNORECASE)


def sibling_rank_files(path: str) -> list[str]:
    """Files in ``path``'s directory whose names differ from its name only by the rank number."""
    directory, name = os.path.split(os.path.abspath(path))
    m = _RANK.search(name)
    if not m:
        raise UsageError(f"{name}: the name has no rank number (like snap.rank0.pickle) to find the other ranks by")
    pattern = re.compile(re.escape(name[:m.start(2)]) + r"\d+" + re.escape(name[m.end(2):]) + "$")
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if pattern.match(n))


class RanksReportScreen(AnalysisScreen):
    TITLE_TEXT = "Ranks"
    COLUMNS = ("rank", "peak allocated", "peak reserved", "OOMs", "events", "", "file")
    HINT = "Enter: the open file's peak, or open another rank's snapshot · Esc: close"

    def __init__(self, view: DeviceView, depth: int = 1) -> None:
        super().__init__()
        self.view = view
        self.depth = depth
        self.files: list[str] = []

    def compute(self) -> dict:
        snapshot = self.view.snapshot
        path = os.path.abspath(snapshot.source_path)
        others = [p for p in sibling_rank_files(path) if p != path]
        own = {"file": path, "error": None, "rank": rank_from_name(path), **summarize_snapshot(snapshot, self.depth)}
        cache = default_summary_cache(getattr(self.app, "model_cache", None))
        summaries = [own] + (summarize_files(others, depth=self.depth, cache=cache) if others else [])
        summaries.sort(key=lambda s: (s.get("rank") is None, s.get("rank") or 0, s["file"]))
        return compare_ranks(summaries)

    def present(self, result: dict) -> tuple[str, list[Row]]:
        own = os.path.abspath(self.view.snapshot.source_path)
        report = ranks_report(result)
        rows: list[Row] = []
        self.files = [r["file"] for r in result["ranks"]]
        for cells, r in zip(rank_cells(report.table("ranks"), "outlier", own), result["ranks"]):
            jump: AnalysisJump | None
            if r["file"] == own:
                peak = int(self.view.allocated.argmax()) if self.view.n_events else None
                jump = event_jump(peak, f"rank {r['rank']}: peak allocated") if peak is not None else None
            else:
                jump = AnalysisJump(None, message=f"rank {r['rank']}: {r['file']}")
            rows.append((cells, jump))
        return sections_text(report, skip=("ranks",)), rows

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        row = message.cursor_row
        own = os.path.abspath(self.view.snapshot.source_path)
        if 0 <= row < len(self.files) and self.files[row] != own and hasattr(self.app, "open_file"):
            message.prevent_default()  # not a jump in this snapshot: another snapshot
            self.dismiss(None)
            self.app.open_file(self.files[row])
