"""The explorer application: loads a snapshot in a worker, then shows the main screen.

``MemtuiApp`` takes a path or a loader callable (``loader(progress) -> Snapshot``), so
tests hand it an already loaded snapshot and skip the file entirely. A path is opened
through the model cache it is given (``cache``; None for none), which the ranks screen
also uses to find the summary cache beside it.

:class:`ExplorerApp` is what it shares with ``memtui ranks --tui`` (memtui/tui/ranks_app.py):
opening a snapshot (the loading screen, then the explorer), help, the command palette,
the order of keys, and :func:`run_explorer`, the one way both end.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from memtui.atomic import remove_temp_files_being_written
from memtui.cache.store import ModelCache
from memtui.export.place import ANYWHERE, ExportPlace
from memtui.model import Snapshot
from memtui.tui.early_load import EarlyLoad
from memtui.tui.key_order import OrderedKeys
from memtui.tui.keys_pause import WorkAfterKeysPause
from memtui.tui.lifecycle import run_in_terminal
from memtui.tui.messages import LoadFailed, LoadFinished
from memtui.tui.screens.loading import Loader, LoadingScreen
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.key_table import app_key_rows


def app_keys(q_says: str, ctrl_c: str) -> list[Binding]:
    """q, ? and Ctrl+C, which every screen of the app answers (``ctrl_c``: its action)."""
    return [Binding(key, action, description, show=show) for key, action, description, show
            in app_key_rows(q_says, ctrl_c)]


class ExplorerApp(OrderedKeys, WorkAfterKeysPause, App[int]):
    """An app that opens snapshots in the explorer. ``loading`` is True while one loads;
    ``load_error`` says why the app ended, when a snapshot it could not open was all it had."""

    CSS_PATH = "app.tcss"
    ALLOW_IN_MAXIMIZED_VIEW = "KeyFooter"  # the keys stay on a maximized pane's screen

    def __init__(self, *, show_source: bool = True, cache: ModelCache | None = None,
                 export_place: ExportPlace = ANYWHERE) -> None:
        super().__init__()
        self.model_cache = cache
        if cache is not None:
            cache.writes_after_the_answer = True  # the screen is drawn first (memtui.cores)
        self.export_place = export_place  # where `x` may write (memtui/export/place.py)
        self._show_source = show_source
        self.load_error: str | None = None
        self.loading = False
        self._explorer_gone = False  # see explorer_closed
        self._writes_held = False
        self._init_key_order()  # keys typed while loading wait for the explorer (memtui/tui/key_order.py)
        self._init_keys_pause()

    # -- opening a snapshot ---------------------------------------------------------------
    def open_file(self, source: str | os.PathLike | Loader, device: int | None = None,
                  started: EarlyLoad | None = None) -> None:
        """Open a snapshot in place of the explorer shown, or over the current screen (a list
        of ranks) when none is; if it cannot be opened, say why and keep what was there (with
        nothing there, the app ends with the reason in ``load_error``). ``started``: its open,
        begun before the app (memtui/tui/early_load.py)."""
        if self.loading:
            self.notify("a snapshot is still loading", severity="warning")
            return
        self.loading = True
        self._hold_cache_writes()
        if started is not None and started.opened_already():
            # Opened while Textual was imported: the explorer is shown at once, with no
            # loading screen made and styled first (and its worker started) to be replaced.
            opened = started.take(lambda *step: None, lambda: False)
            if opened is not None:
                self._show_explorer(*opened, loading_screen=False)
                return
        self.push_screen(LoadingScreen(source, device, self.model_cache, started))
        self.call_after_refresh(_import_the_explorer)

    def stop_loading(self) -> None:
        """Forget the snapshot being opened: its loading screen goes, and its worker with it."""
        if self.loading and isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        self.loading = False
        self._release_cache_writes()

    def on_load_finished(self, message: LoadFinished) -> None:
        self._show_explorer(message.snapshot, message.view, loading_screen=True)

    def _show_explorer(self, snapshot: Snapshot, view: DeviceView, loading_screen: bool) -> None:
        """The explorer of the snapshot just opened: in place of the ``loading_screen`` shown
        (and of the explorer under it, if any), else in place of the explorer shown or over
        the current screen."""
        from memtui.tui.screens.main import MainScreen

        if not self.loading:
            return  # stopped (q) while it finished
        self.loading = False
        explorer = MainScreen(snapshot, view, show_source=self._show_source)
        if loading_screen and isinstance(self.screen_stack[-2], MainScreen):
            self.pop_screen()  # the loading screen: the new explorer replaces the one under it
        if loading_screen or isinstance(self.screen, MainScreen):
            self.switch_screen(explorer)
        else:
            self.push_screen(explorer)
        self.call_after_refresh(self._after_first_screen)

    def on_load_failed(self, message: LoadFailed) -> None:
        if not self.loading:
            return
        self.loading = False
        self._release_cache_writes()
        if len(self.screen_stack) <= 2:  # the loading screen over the app's empty one: nothing to keep
            self.load_error = message.message
            self.exit(return_code=message.exit_code)
            return
        self.pop_screen()  # the loading screen; what was open stays open
        self.notify(message.message, severity="error", timeout=8)

    def _after_first_screen(self) -> None:
        self.when_keys_pause(self._release_cache_writes)  # the first keys get the cores
        # What the first open made and its explorer built (the model's tables, the widgets)
        # lives as long as the snapshot is shown: the cyclic collector is told to leave it out
        # of its passes. The first full pass over it came soon after the first screen (46 ms
        # at 10M events), and a key typed meanwhile waited for it. Only for the app's first
        # explorer: once one has gone, what it held may still be reachable for a moment (its
        # widgets' tasks closing) and would be frozen with the rest, so later opens are left
        # to the collector as they were.
        if not self._explorer_gone:
            gc.freeze()

    def explorer_closed(self) -> None:
        """An explorer's screen went (replaced by another, or popped back to a list): what it
        held goes back to the collector, and no later explorer is frozen."""
        gc.unfreeze()
        self._explorer_gone = True

    def _hold_cache_writes(self) -> None:
        """The model built by this load is written to the cache once the explorer has drawn
        its first screen, not while it prepares it (the write takes a core and the GIL)."""
        if self.model_cache is not None and not self._writes_held:
            self._writes_held = True
            self.model_cache.hold_writes()

    def _release_cache_writes(self) -> None:
        if self.model_cache is not None and self._writes_held:
            self._writes_held = False
            self.model_cache.release_writes()

    # -- app-wide actions ------------------------------------------------------------------
    def action_help(self) -> None:
        from memtui.tui.keys import key_reference
        from memtui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(key_reference()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key and what it does", self.action_help)
        commands = getattr(screen, "palette_commands", None)
        if commands is not None:
            yield from commands()


class MemtuiApp(ExplorerApp):
    TITLE = "memtui"
    BINDINGS = app_keys("Quit", ctrl_c="quit")

    def __init__(self, source: str | os.PathLike | Loader, device: int | None = None, *,
                 show_source: bool = True, cache: ModelCache | None = None,
                 export_place: ExportPlace = ANYWHERE, started: EarlyLoad | None = None) -> None:
        super().__init__(show_source=show_source, cache=cache, export_place=export_place)
        self._source = source
        self._device = device
        self._started = started

    def on_mount(self) -> None:
        self.start_key_order()
        self.open_file(self._source, self._device, self._started)


def run_explorer(app: ExplorerApp, cache_root: str | None = None,
                 before_hard_exit: Callable[[], None] | None = None) -> int:
    """Run ``app`` in the terminal (see :func:`memtui.tui.lifecycle.run_in_terminal` for signals
    and crashes); its exit status, with the reason on stderr if it ended on a file it could
    not open."""
    code = run_in_terminal(app, cache_root=cache_root)
    if app.load_error:
        print(f"memtui: {app.load_error}", file=sys.stderr)
    if app.loading:
        # Quit during a load: the unpickler cannot be interrupted between progress calls,
        # and waiting for it would make "quit at once" take seconds.
        if before_hard_exit is not None:
            before_hard_exit()
        if app.model_cache is not None:
            app.model_cache.abandon()  # a write that began as the load ended leaves no temporary file
        remove_temp_files_being_written()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def run_app(path: str | os.PathLike, device: int | None = None, cache: ModelCache | None = None,
            export_place: ExportPlace = ANYWHERE, started: EarlyLoad | None = None) -> int:
    """Run the explorer on ``path`` (through the model ``cache``, exporting only where
    ``export_place`` allows; ``started``: its open, begun before Textual was imported); the
    exit status (2 with one line on stderr if it cannot load)."""
    app = MemtuiApp(path, device=device, cache=cache, export_place=export_place, started=started)
    return run_explorer(app, cache.root if cache is not None else None)


def _import_the_explorer() -> None:
    """The explorer's screen and its 30-odd modules (60-90 ms here), imported while the loading
    screen waits for the open, not after the open has finished (on_load_finished)."""
    import memtui.tui.screens.main  # noqa: F401
