"""``memtui watch``: the explorer on memory that is still moving.

One app for the live view (memtui/tui/screens/live.py) and the normal explorer, which a
freeze opens over it; backspace in the explorer comes back to the live view.
"""

from __future__ import annotations

from textual.binding import Binding

from memtui.cache.store import ModelCache
from memtui.live.runtime import JobInfo
from memtui.tui.app import ExplorerApp, app_keys, run_explorer
from memtui.tui.screens.job_list import JobListScreen, group_jobs
from memtui.tui.screens.live import LiveScreen
from memtui.tui.views.key_table import WATCH_BACK_KEY


class WatchApp(ExplorerApp):
    TITLE = "memtui watch"
    BINDINGS = [*app_keys("Quit", ctrl_c="quit"), Binding(*WATCH_BACK_KEY[:3], show=WATCH_BACK_KEY[3])]

    def __init__(self, jobs: list[JobInfo], out_dir: str | None = ".", cache: ModelCache | None = None) -> None:
        super().__init__(cache=cache)
        self.jobs = jobs
        self.out_dir = out_dir

    def on_mount(self) -> None:
        self.start_key_order()
        groups = group_jobs(self.jobs)
        if len(groups) == 1:
            self.push_screen(LiveScreen(groups[0], self.out_dir))
        else:
            self.push_screen(JobListScreen(self.jobs, self.watch))

    def watch(self, jobs: list[JobInfo]) -> None:
        self.push_screen(LiveScreen(jobs, self.out_dir))

    def action_back_to_live(self) -> None:
        """From an explorer opened by a freeze, back to the live view under it."""
        if len(self.screen_stack) > 2 and not isinstance(self.screen, LiveScreen) and any(
                isinstance(s, LiveScreen) for s in self.screen_stack):
            self.pop_screen()


def run_watch_app(jobs: list[JobInfo], out_dir: str | None = ".", cache: ModelCache | None = None) -> int:
    app = WatchApp(jobs, out_dir, cache)
    try:
        return run_explorer(app, cache.root if cache is not None else None)
    finally:
        for screen in app.screen_stack:
            if isinstance(screen, LiveScreen):
                screen.close_clients()
