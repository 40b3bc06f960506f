"""``memtui diff A B --tui``: the diff screen on its own, for a diff already computed."""

from __future__ import annotations

from textual.app import App
from textual.binding import Binding

from memtui.analysis.diff import MemoryDiff
from memtui.tui.lifecycle import run_in_terminal
from memtui.tui.screens.diff_report import DiffReportScreen


class DiffApp(App[int]):
    TITLE = "memtui diff"
    BINDINGS = [Binding("ctrl+c", "quit", "Quit", show=False)]

    def __init__(self, diff: MemoryDiff) -> None:
        super().__init__()
        self.diff = diff

    def on_mount(self) -> None:
        self.push_screen(DiffReportScreen(lambda: self.diff), lambda _: self.exit(0))


def run_diff_app(diff: MemoryDiff, cache_root: str | None = None) -> int:
    """Show ``diff``; a crash is reported under ``cache_root`` (the run's cache folder)."""
    app = DiffApp(diff)
    return run_in_terminal(app, cache_root=cache_root)
