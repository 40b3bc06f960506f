"""The screens of the explorer's analysis keys (the keys themselves are rows of
memtui/tui/views/key_table.py, made from the spec table memtui.services.catalog): each opens
an analysis screen, and the row chosen there moves the event log (to an event, or to one
call site's events: a :class:`memtui.tui.views.log_scope.Site`, shown by ``MainScreen.set_scope``).

An analysis with a screen of its own is listed in :data:`SCREENS`; any other with a key
shows its report in :class:`~memtui.tui.screens.service_report.ServiceReportScreen`.
"""

from __future__ import annotations

import importlib

from textual.screen import Screen

from memtui.services.catalog import spec
from memtui.tui.views.device_view import DeviceView

# The analyses with a screen of their own: module and class, imported when the key is pressed.
SCREENS = {
    "oom": ("memtui.tui.screens.oom_report", "OomReportScreen"),
    "leaks": ("memtui.tui.screens.leaks_report", "LeaksReportScreen"),
    "cycles": ("memtui.tui.screens.cycles_report", "CyclesReportScreen"),
    "ranks": ("memtui.tui.screens.ranks_report", "RanksReportScreen"),
    "whatif": ("memtui.tui.screens.whatif_report", "WhatIfReportScreen"),
}


def analysis_screen(name: str, view: DeviceView, cursor: int) -> Screen:
    """The screen of analysis ``name`` over ``view`` (the diff compares ``cursor`` with the end)."""
    if name == "diff":
        return _diff_screen(view, cursor)
    if name in SCREENS:
        module, cls = SCREENS[name]
        return getattr(importlib.import_module(module), cls)(view)
    from memtui.tui.screens.service_report import ServiceReportScreen

    return ServiceReportScreen(spec(name), view)


def _diff_screen(view: DeviceView, cursor: int) -> Screen:
    from memtui.analysis.diff import diff_views, view_at_end, view_at_event
    from memtui.errors import UsageError
    from memtui.model.snapshot import NOT_REPLAYED
    from memtui.tui.screens.diff_report import DiffReportScreen

    def make():
        if view.device.partial_trace:  # every moment of a filtered export is its end: nothing to compare
            raise UsageError(f"diff of the cursor's event and the end: {NOT_REPLAYED}")
        return diff_views(view_at_event(view.snapshot, view.device, cursor, replayer=view.replayer),
                          view_at_end(view.snapshot, view.device))

    return DiffReportScreen(make, view)
