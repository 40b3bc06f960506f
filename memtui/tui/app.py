"""The explorer application: loads a snapshot in a worker, then shows the main screen.

``MemtuiApp`` takes a path or a loader callable (``loader(progress) -> Snapshot``), so
tests hand it an already loaded snapshot and skip the file entirely. A path is opened
through the model cache it is given (``cache``; None for none), which the ranks screen
also uses to find the summary cache beside it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import get_current_worker

from memtui.cache import ModelCache
from memtui.errors import MemtuiError
from memtui.load import ProgressFn
from memtui.model import Snapshot
from memtui.open import open_snapshot
from memtui.tui.device_view import build_device_view
from memtui.tui.key_order import OrderedKeys
from memtui.tui.lifecycle import run_in_terminal
from memtui.tui.messages import LoadFailed, LoadFinished, LoadProgress

Loader = Callable[[ProgressFn], Snapshot]
PROGRESS_INTERVAL = 0.05  # seconds between progress messages: enough for a smooth bar


class _LoadCancelled(Exception):
    """Raised inside the loader's progress callback to stop a load nobody waits for."""


class MemtuiApp(OrderedKeys, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "memtui"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("ctrl+c", "quit", "Quit", show=False),
    ]

    def __init__(self, source: str | os.PathLike | Loader, device: int | None = None, *,
                 show_source: bool = True, cache: ModelCache | None = None) -> None:
        super().__init__()
        self.model_cache = cache
        self._source = source
        self._device = device
        self._show_source = show_source
        self.snapshot: Snapshot | None = None
        self.load_error: str | None = None
        self.loading = False
        self._opening_another = False  # a load asked for by open_file: a failure must not end the app
        self._init_key_order()  # keys typed while loading wait for the explorer (memtui/tui/key_order.py)

    # -- loading ---------------------------------------------------------------------
    def _source_name_and_size(self) -> tuple[str, int]:
        if callable(self._source):
            return "snapshot", 0
        path = os.fspath(self._source)
        try:
            return os.path.basename(path), os.path.getsize(path)
        except OSError:
            return os.path.basename(path), 0

    def on_mount(self) -> None:
        from memtui.tui.screens.loading import LoadingScreen

        self.start_key_order()
        name, size = self._source_name_and_size()
        self.push_screen(LoadingScreen(name, size))
        self.loading = True
        self._load()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
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
            source = self._source
            snapshot = source(progress) if callable(source) else open_snapshot(source, progress, cache=self.model_cache)
            progress("preparing", 0, 1)
            device = self._first_device(snapshot)
            view = build_device_view(snapshot, device)
        except _LoadCancelled:
            return
        except MemtuiError as exc:
            self.post_message(LoadFailed(exc.message, exc.exit_code))
            return
        except MemoryError:
            self.post_message(LoadFailed("out of memory while loading the snapshot", 2))
            return
        except Exception as exc:  # a bug, but the user still gets one line, not a traceback
            name = self._source_name_and_size()[0]
            self.post_message(LoadFailed(f"{name}: cannot be opened ({type(exc).__name__}: {exc})", 2))
            return
        self.post_message(LoadFinished(snapshot, view))

    def _first_device(self, snapshot: Snapshot) -> int:
        return snapshot.device_or_default(self._device)

    def on_load_progress(self, message: LoadProgress) -> None:
        from memtui.tui.screens.loading import LoadingScreen

        if isinstance(self.screen, LoadingScreen):
            self.screen.show_progress(message.stage, message.done, message.total)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.loading = False
        if self._opening_another:
            self._opening_another = False
            self.pop_screen()  # the loading screen; what was open stays open
            self.notify(message.message, severity="error", timeout=8)
            return
        self.load_error = message.message
        self.exit(return_code=message.exit_code)

    def on_load_finished(self, message: LoadFinished) -> None:
        from memtui.tui.screens.main import MainScreen

        self.loading = False
        self.snapshot = message.snapshot
        main = MainScreen(message.snapshot, message.view, show_source=self._show_source)
        if self._opening_another:
            self._opening_another = False
            self.pop_screen()  # the loading screen
            if not isinstance(self.screen, MainScreen):  # e.g. the list of ranks it was chosen from
                self.push_screen(main)
                return
        self.switch_screen(main)

    def open_file(self, path: str | os.PathLike, device: int | None = None) -> None:
        """Open another snapshot (a rank chosen from the ranks screen) in place of the one
        shown, or over the current screen when no snapshot is shown; if it cannot be opened,
        say why and keep what was there."""
        from memtui.tui.screens.loading import LoadingScreen

        if self.loading:
            self.notify("a snapshot is still loading", severity="warning")
            return
        self._source, self._device = path, device
        self._opening_another = True
        name, size = self._source_name_and_size()
        self.push_screen(LoadingScreen(name, size))
        self.loading = True
        self._load()

    # -- app-wide actions ------------------------------------------------------------------
    def action_help(self) -> None:
        from memtui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key and what it does", self.action_help)
        commands = getattr(screen, "palette_commands", None)
        if commands is not None:
            yield from commands()


def run_app(path: str | os.PathLike, device: int | None = None, cache: ModelCache | None = None) -> int:
    """Run the explorer on ``path`` (through the model ``cache``); the exit status (2 with one
    line on stderr if it cannot load; see :func:`memtui.tui.lifecycle.run_in_terminal` for
    signals and crashes)."""
    app = MemtuiApp(path, device=device, cache=cache)
    code = run_in_terminal(app, cache_root=cache.root if cache is not None else None)
    if app.load_error:
        print(f"memtui: {app.load_error}", file=sys.stderr)
    if app.loading:
        # Quit during a load: the unpickler cannot be interrupted between progress calls,
        # and waiting for it would make "quit at once" take seconds.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
