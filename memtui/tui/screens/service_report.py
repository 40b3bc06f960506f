"""An analysis of the spec table with no screen of its own: its report, laid out as the command prints it.

Its first table's rows are listed below the text; a row whose table has an ``event``
column goes to that event. A new analysis shows here until it gets a screen of its own.
"""

from __future__ import annotations

import dataclasses

from memtui.services.spec import AnalysisSpec
from memtui.tui.screens.analysis_base import AnalysisScreen, Row, sections_text, table_cells
from memtui.tui.views.analysis_jumps import event_jump
from memtui.tui.views.device_view import DeviceView


class ServiceReportScreen(AnalysisScreen):
    HINT = "Enter on a row with an event: go to it · Esc: close"

    def __init__(self, spec: AnalysisSpec, view: DeviceView) -> None:
        self.TITLE_TEXT = spec.key_help or spec.name
        super().__init__()
        self.spec = spec
        self.view = view

    def compute(self) -> object:
        fields = {f.name for f in dataclasses.fields(self.spec.options)}
        options = self.spec.options(**({"device": self.view.device.device} if "device" in fields else {}))
        return self.spec.service(self.view.snapshot, options)

    def present(self, result) -> tuple[str, list[Row]]:
        report = result.report()
        tables = [s for s in report.sections if hasattr(s, "columns") and s.rows]
        if not tables:
            return sections_text(report), []
        table = tables[0]
        self.COLUMNS = tuple(c.title for c in table.columns)
        keys = [c.key for c in table.columns]
        rows: list[Row] = []
        for cells, record in zip(table_cells(table, keys), table.records()):
            event = record.get("event")
            rows.append((cells, event_jump(int(event)) if isinstance(event, int) else None))
        return sections_text(report, skip=(table.key,)), rows
