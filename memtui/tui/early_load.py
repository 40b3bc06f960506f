"""The explorer's snapshot, opened from the moment the explorer is asked for.

Importing Textual and starting the app take a few tenths of a second before the loading
screen can start a load; opening a cached model takes about as long, mostly outside the
GIL (the checks of its pieces, the memory map). So the command starts the open here, on a
thread of its own, before it imports Textual, and the loading screen takes the result
(:meth:`EarlyLoad.take`), showing the progress made so far and from then on. This module
imports nothing of Textual.

A model built (not read from the cache) is written after the explorer's first screen, as
on every other path: the open holds the cache's writes until the loading screen has taken
the result, and the app holds them from there until its first screen is drawn.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from memtui.cache.store import ModelCache
from memtui.errors import MemtuiError
from memtui.load.source import ProgressFn
from memtui.model import Snapshot
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.first_view import open_first_view


def failure_line(exc: BaseException, file: str) -> tuple[str, int]:
    """What an open that failed with ``exc`` says in one line, and the exit status: the same
    whether the failure came before the app started or while the loading screen showed."""
    if isinstance(exc, MemtuiError):
        return exc.message, exc.exit_code
    if isinstance(exc, MemoryError):
        return "out of memory while loading the snapshot", 2
    return f"{file}: cannot be opened ({type(exc).__name__}: {exc})", 2  # a bug, but one line


class _Abandoned(Exception):
    """Raised in the open's progress to stop an open nobody will take."""


class EarlyLoad:
    """The snapshot at ``path`` and the view of ``device`` the explorer opens on
    (:func:`memtui.tui.views.first_view.open_first_view`), made on a daemon thread started at
    once (a process that ends while it runs is not held up by it: the explorer ends a load
    it quits with _exit)."""

    def __init__(self, path: str | os.PathLike, device: int | None, cache: ModelCache | None) -> None:
        self.path = path
        self._device = device
        self._cache = cache
        self._lock = threading.Lock()
        self._listener: ProgressFn | None = None
        self._latest: tuple[str, int, int] | None = None  # the progress made before a listener came
        self._done = threading.Event()
        self._opened: tuple[Snapshot, DeviceView] | None = None
        self._error: Exception | None = None
        self._abandoned = False
        if cache is not None:
            cache.hold_writes()  # released in take(): the app holds them on to its first screen
        threading.Thread(target=self._open, name="memtui-early-load", daemon=True).start()

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self._abandoned:
            raise _Abandoned
        with self._lock:
            listener = self._listener
            if listener is None:
                self._latest = (stage, done, total)
                return
        listener(stage, done, total)  # may raise to stop the open (the loading screen went away)

    def _open(self) -> None:
        try:
            self._opened = open_first_view(self.path, self._device, self._cache, self._progress)
        except Exception as exc:  # handed to the loading screen, which says what it was
            self._error = exc
        except BaseException as exc:  # noqa: BLE001 - (none is expected here) still an answer, never a wait
            self._error = RuntimeError(f"the open ended on {type(exc).__name__}")
        finally:
            self._done.set()

    def opened_already(self) -> bool:
        """Whether the open has finished without an error (a warm open of a kept model
        usually has by the time the app starts): :meth:`take` then returns at once."""
        return self._done.is_set() and self._error is None

    def failed_already(self) -> tuple[str, int] | None:
        """The line and exit status of an open that has already failed (a missing device, a
        file refused from its start: usually before Textual is imported), else None. Said
        before the app starts, a failure is the one line alone, with no terminal codes
        around it where stderr is a file."""
        if not self._done.is_set() or self._error is None:
            return None
        if self._cache is not None:
            self._cache.release_writes()
        return failure_line(self._error, os.path.basename(os.fspath(self.path)))

    def abandon(self) -> None:
        """The app ended without taking the result: the open stops at its next step (and so
        writes nothing to the cache for an exit to wait on)."""
        self._abandoned = True

    def take(self, progress: ProgressFn, cancelled: Callable[[], bool]) -> tuple[Snapshot, DeviceView] | None:
        """The snapshot and its view, once made (or the exception, raised here); ``progress`` is
        told how far it is, from the last step made before this call on. None when
        ``cancelled()`` turns true first."""
        with self._lock:
            self._listener, latest = progress, self._latest
        try:
            if latest is not None and not self._done.is_set():
                progress(*latest)
            while not self._done.wait(0.05):
                if cancelled():
                    return None
            if self._error is not None:
                raise self._error
            return self._opened
        finally:
            if self._cache is not None:
                self._cache.release_writes()
