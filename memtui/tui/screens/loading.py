"""The loading screen: opens one snapshot in a worker and shows the file, the stage and how far it is.

It posts :class:`~memtui.tui.messages.LoadFinished` or :class:`~memtui.tui.messages.LoadFailed`,
which bubble up to the app (memtui/tui/app.py decides what shows next). Taking the
screen away stops the load: its worker is cancelled with it, and the loader stops at its
next progress call.
"""

from __future__ import annotations

import os
import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Center, Vertical
from textual.screen import Screen
from textual.widgets import Label, ProgressBar
from textual.worker import get_current_worker

from memtui.cache.store import ModelCache
from memtui.tui.early_load import EarlyLoad, failure_line
from memtui.tui.messages import LoadFailed, LoadFinished, LoadProgress
from memtui.tui.views.first_view import Loader, open_first_view
from memtui.tui.workers import thread_work
from memtui.units import format_bytes

PROGRESS_INTERVAL = 0.05  # seconds between progress messages: enough for a smooth bar
STAGE_TEXT = {
    "reading": "reading and decoding",
    "indexing": "indexing events, stacks and allocations",
    "preparing": "preparing the explorer",
}


class _LoadCancelled(Exception):
    """Raised inside the loader's progress callback to stop a load nobody waits for."""


def source_name_and_size(source: str | os.PathLike | Loader) -> tuple[str, int]:
    if callable(source):
        return "snapshot", 0
    path = os.fspath(source)
    try:
        return os.path.basename(path), os.path.getsize(path)
    except OSError:
        return os.path.basename(path), 0


class LoadingScreen(Screen):
    """Shown while the snapshot loads; q or Ctrl+C quits at once.

    Other keys typed meanwhile wait and go to the explorer once it shows (``HOLDS_KEYS``,
    see memtui/tui/key_order.py).
    """

    HOLDS_KEYS = True

    BINDINGS = [
        Binding("q", "app.quit", "Quit"),
        Binding("ctrl+c", "app.quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, source: str | os.PathLike | Loader, device: int | None = None,
                 cache: ModelCache | None = None, started: EarlyLoad | None = None) -> None:
        """``source``: a path, opened through the model ``cache``, or ``loader(progress) -> Snapshot``;
        ``device``: the one to show first (None: the default, see ``Snapshot.device_or_default``);
        ``started``: the open of ``source`` begun before the app (memtui/tui/early_load.py)."""
        super().__init__()
        self._source = source
        self._started = started
        self._device = device
        self._cache = cache
        self._file, self._file_size = source_name_and_size(source)

    def compose(self) -> ComposeResult:
        with Vertical(id="loading-box"):
            yield Label("memtui", id="loading-title")
            yield Label(f"{self._file} ({format_bytes(self._file_size)})" if self._file_size else self._file,
                        id="loading-file")
            yield Label("opening", id="loading-stage")
            with Center():
                yield ProgressBar(total=None, show_eta=False, id="loading-bar")
            yield Label("q quits", id="loading-hint")

    def on_mount(self) -> None:
        self._load()

    @thread_work(exclusive=True, group="load", exit_on_error=False)
    def _load(self) -> None:
        worker = get_current_worker()
        last = [0.0, ""]

        def progress(stage: str, done: int, total: int) -> None:
            if worker.is_cancelled:
                raise _LoadCancelled
            now = time.monotonic()
            if stage != last[1] or now - last[0] >= PROGRESS_INTERVAL or done >= total:
                last[0], last[1] = now, stage
                self.post_message(LoadProgress(stage, done, total))

        try:
            if self._started is not None:
                opened = self._started.take(progress, lambda: worker.is_cancelled)
                if opened is None:
                    return
            else:
                opened = open_first_view(self._source, self._device, self._cache, progress)
            snapshot, view = opened
        except _LoadCancelled:
            return
        except Exception as exc:  # MemoryError among them: one line, never a traceback
            self.post_message(LoadFailed(*failure_line(exc, self._file)))
            return
        self.post_message(LoadFinished(snapshot, view))

    def on_load_progress(self, message: LoadProgress) -> None:
        self.query_one("#loading-stage", Label).update(STAGE_TEXT.get(message.stage, message.stage))
        bar = self.query_one("#loading-bar", ProgressBar)
        if message.total > 1:
            bar.update(total=message.total, progress=message.done)
        else:
            bar.update(total=None)
