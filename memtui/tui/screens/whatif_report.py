"""What if (W): the recording replayed under other allocator settings, ranked.

The table lists each setting's reserved peak, where it runs out, whether it serves the
request the recording ran out on and the smallest memory it fits in (memtui whatif). Enter
on a setting shows the segment map and the timeline as that allocator would have laid them
out (screens/simulated.py), at the recorded OOM, else where it runs out, else its peak.
"""

from __future__ import annotations

from textual.widgets import DataTable

from memtui.analysis.whatif import WhatIf, what_if
from memtui.services.whatif import AFTER_THE_OOM, fits_in, header_lines
from memtui.tui.screens.analysis_base import AnalysisScreen, Row
from memtui.tui.views.device_view import DeviceView
from memtui.units import format_bytes


class WhatIfReportScreen(AnalysisScreen):
    TITLE_TEXT = "What if the allocator had been set differently? (replayed through a model of torch's allocator)"
    COLUMNS = ("reserved peak", "runs out at", "recorded OOM", "fits in", "settings")
    HINT = "Enter on a setting: its simulated segment map and timeline · Esc: close"

    def __init__(self, view: DeviceView) -> None:
        super().__init__()
        self.view = view

    def compute(self) -> WhatIf:
        return what_if(self.view.snapshot, self.view.device.device, workers=1)

    def present(self, result: WhatIf) -> tuple[str, list[Row]]:
        f = format_bytes
        lines = header_lines(result)  # as the command opens
        if result.recorded_oom is not None:
            lines.append(AFTER_THE_OOM)
        rows: list[Row] = []
        for s in result.scenarios:
            passes = {None: "-", True: "served", False: "not served"}[s.passes_recorded_oom]
            if not s.passes_certain:
                passes += " (depends on the cap)"
            cells = (f(s.reserved_peak), f"{s.oom_event:,}" if s.oom_event is not None else "-", passes,
                     fits_in(s),
                     (s.settings or "default") + (" (recorded)" if s.recorded else ""))
            rows.append((cells, None))
        return "\n".join(lines), rows

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        result = self.result
        if not isinstance(result, WhatIf) or not 0 <= message.cursor_row < len(result.scenarios):
            return
        from memtui.tui.screens.simulated import SimulatedScreen

        scenario = result.scenarios[message.cursor_row]
        at = next((e for e in (result.recorded_oom, scenario.oom_event, scenario.peak_event)
                   if e is not None and e >= 0), max(self.view.n_events - 1, 0))
        self.app.push_screen(SimulatedScreen(self.view, scenario.settings, result.limit, at))
