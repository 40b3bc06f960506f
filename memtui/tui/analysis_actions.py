"""The explorer's analysis keys: each opens an analysis screen, and the row chosen there
moves the event log (to an event, or to one call site's events: a
:class:`memtui.tui.log_scope.Site`, shown by ``MainScreen.set_scope``).
"""

from __future__ import annotations

from textual.screen import Screen

from memtui.tui.device_view import DeviceView

# (key, action, description, shown in the footer), as the main screen lists its keys.
ANALYSIS_KEYS = [
    ("w", "analysis('oom')", "Why OOM", True),
    ("L", "analysis('leaks')", "Leaks by call site", False),
    ("C", "analysis('cycles')", "Reference cycles", False),
    ("D", "analysis('diff')", "Diff: cursor vs end", False),
    ("R", "analysis('ranks')", "Compare ranks", False),
    ("W", "analysis('whatif')", "What if: other allocator settings", False),
]
ANALYSIS_PALETTE = [
    ("show_all_events", "Show all events", "Clear the call-site filter that an analysis put on the event log"),
]


def analysis_screen(name: str, view: DeviceView, cursor: int) -> Screen:
    """The screen of analysis ``name`` over ``view`` (the diff compares ``cursor`` with the end)."""
    if name == "oom":
        from memtui.tui.screens.oom_report import OomReportScreen

        return OomReportScreen(view)
    if name == "leaks":
        from memtui.tui.screens.leaks_report import LeaksReportScreen

        return LeaksReportScreen(view)
    if name == "cycles":
        from memtui.tui.screens.cycles_report import CyclesReportScreen

        return CyclesReportScreen(view)
    if name == "diff":
        return _diff_screen(view, cursor)
    if name == "whatif":
        from memtui.tui.screens.whatif_report import WhatIfReportScreen

        return WhatIfReportScreen(view)
    from memtui.tui.screens.ranks_report import RanksReportScreen

    return RanksReportScreen(view)


def _diff_screen(view: DeviceView, cursor: int) -> Screen:
    from memtui.analysis.diff import diff_views, view_at_end, view_at_event
    from memtui.tui.screens.diff_report import DiffReportScreen

    def make():
        return diff_views(view_at_event(view.snapshot, view.device, cursor, replayer=view.replayer),
                          view_at_end(view.snapshot, view.device))

    return DiffReportScreen(make, view)
