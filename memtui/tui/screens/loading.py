"""The loading screen: file name and size, what the loader is doing, and how far it is."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Center, Vertical
from textual.screen import Screen
from textual.widgets import Label, ProgressBar

from memtui.units import format_bytes

STAGE_TEXT = {
    "reading": "reading and decoding",
    "indexing": "indexing events, stacks and allocations",
    "preparing": "preparing the explorer",
}


class LoadingScreen(Screen):
    """Shown while the snapshot loads in a worker; q or Ctrl+C quits at once.

    Other keys typed meanwhile wait and go to the explorer once it shows (``HOLDS_KEYS``,
    see memtui/tui/key_order.py).
    """

    HOLDS_KEYS = True

    BINDINGS = [
        Binding("q", "app.quit", "Quit"),
        Binding("ctrl+c", "app.quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, name: str, size: int) -> None:
        super().__init__()
        self._file = name
        self._file_size = size

    def compose(self) -> ComposeResult:
        with Vertical(id="loading-box"):
            yield Label("memtui", id="loading-title")
            yield Label(f"{self._file} ({format_bytes(self._file_size)})" if self._file_size else self._file,
                        id="loading-file")
            yield Label("opening", id="loading-stage")
            with Center():
                yield ProgressBar(total=None, show_eta=False, id="loading-bar")
            yield Label("q quits", id="loading-hint")

    def show_progress(self, stage: str, done: int, total: int) -> None:
        self.query_one("#loading-stage", Label).update(STAGE_TEXT.get(stage, stage))
        bar = self.query_one("#loading-bar", ProgressBar)
        if total > 1:
            bar.update(total=total, progress=done)
        else:
            bar.update(total=None)
