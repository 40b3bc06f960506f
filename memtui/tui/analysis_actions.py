"""The explorer's analysis keys: each opens an analysis screen, and the row chosen there
moves the event log (to an event, or to one call site's allocations, filtered).

Mixed into the main screen, which provides ``current_view``, ``event_log``, ``status``,
``go_to`` and the n/N search steps.
"""

from __future__ import annotations

from memtui.tui.analysis_jumps import AnalysisJump
from memtui.tui.search import SearchResult

# (key, action, description, shown in the footer), as the main screen lists its keys.
ANALYSIS_KEYS = [
    ("w", "analysis('oom')", "Why OOM", True),
    ("L", "analysis('leaks')", "Leaks by call site", False),
    ("C", "analysis('cycles')", "Reference cycles", False),
    ("D", "analysis('diff')", "Diff: cursor vs end", False),
    ("R", "analysis('ranks')", "Compare ranks", False),
]
ANALYSIS_PALETTE = [
    ("show_all_events", "Show all events", "Clear the call-site filter that an analysis put on the event log"),
]


class AnalysisActions:
    _analysis_filter: str | None = None

    def action_analysis(self, name: str) -> None:
        self.app.push_screen(self._analysis_screen(name), self._analysis_chosen)

    def _analysis_screen(self, name: str):
        view = self.current_view
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
            return self._diff_screen()
        from memtui.tui.screens.ranks_report import RanksReportScreen

        return RanksReportScreen(view)

    def _diff_screen(self):
        from memtui.analysis.diff import diff_views, view_at_end, view_at_event
        from memtui.tui.screens.diff_report import DiffReportScreen

        view = self.current_view
        cursor = max(self.cursor, 0)

        def make():
            return diff_views(view_at_event(view.snapshot, view.device, cursor, replayer=view.replayer),
                              view_at_end(view.snapshot, view.device))

        return DiffReportScreen(make, view)

    def _analysis_chosen(self, jump: AnalysisJump | None) -> None:
        if jump is None or jump.event is None:
            return
        log = self.event_log
        # Changing the rows makes the log announce its cursor; every change below ends with
        # the cursor on the target, so the last announcement (the one the map and the
        # inspector follow) is the target's.
        if jump.rows is not None:
            if log.row_of_event(jump.event) is None:
                log.set_rows(None)
            log.go_to_event(jump.event, notify=False)
            log.set_rows(jump.rows)
            self._analysis_filter = jump.label
            self.query_one("#events").border_title = f"Events of {jump.label}"
        elif self._analysis_filter is not None:
            self._clear_analysis_filter()
        if jump.steps is not None:
            device = self.current_view.device.device
            self._search = SearchResult(jump.label, "text", device, jump.steps, message=jump.message)
        if not log.go_to_event(jump.event, notify=True):
            self.status.say(f"event {jump.event:,} is hidden by the current view", warning=True)
        elif jump.message:
            self.status.say(jump.message)

    def action_show_all_events(self) -> None:
        if self._analysis_filter is None:
            self.status.say("the event log is not filtered by an analysis")
            return
        self._clear_analysis_filter()
        self.status.say("showing all events")

    def _clear_analysis_filter(self) -> None:
        self._analysis_filter = None
        self.event_log.set_rows(None)
        self.query_one("#events").border_title = "Events"
