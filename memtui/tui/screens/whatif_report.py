"""What if (W): the recording replayed under other allocator settings, ranked.

The table lists each setting's reserved peak, where it runs out, whether it serves the
request the recording ran out on and the smallest memory it fits in (memtui whatif). Enter
on a setting shows the segment map and the timeline as that allocator would have laid them
out (screens/simulated.py), at the recorded OOM, else where it runs out, else its peak.
"""

from __future__ import annotations

from textual.widgets import DataTable

from memtui.analysis.whatif import WhatIf, what_if
from memtui.services.whatif import fits_in
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
        lines = [result.advice, ""]
        oom = f", OOM at event {result.recorded_oom:,}" if result.recorded_oom is not None else ""
        lines.append(f"recorded with {result.recorded_settings or 'default'}: reserved peak"
                     f" {f(result.recorded_peak)}{oom}")
        limit = result.limit
        lines.append(f"limit: {f(limit.bytes) if limit.bytes is not None else 'none'} ({limit.source})"
                     + (f": {limit.note}" if limit.note else ""))
        if result.starts_mid_run:
            lines.append("the trace starts mid-run: the replays start from the recorded layout at its first event")
        fid = result.fidelity
        if not fid.checked:
            lines.append(f"fidelity: not checked ({fid.note}): the figures are the model's alone")
        elif fid.exact:
            lines.append(f"fidelity: exact: under the recorded settings the model reproduces all"
                         f" {fid.segment_events:,} segment events")
        else:
            d = fid.first_difference or {}
            lines.append(f"fidelity: NOT exact ({fid.matched:,} of {fid.segment_events:,} segment events); first"
                         f" difference at event {d.get('event')}: recorded {d.get('recorded')}, simulated"
                         f" {d.get('simulated')}. Not certain.")
        if result.recorded_oom is not None:
            lines.append("What comes after the recorded OOM is not recorded.")
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
