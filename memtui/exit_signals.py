"""How a command ends on Ctrl-C, SIGTERM or SIGHUP: at once, in one line, leaving no file half-written.

By default SIGTERM and SIGHUP kill the process where it stands, so a temporary file being
written (an export, a conversion, the model cache) stays behind, and Ctrl-C raises
KeyboardInterrupt wherever the main thread is, even inside the clean-up of an earlier one
(a second traceback). Here each of them raises :class:`memtui.errors.Interrupted` (a
KeyboardInterrupt, so everything that stops on Ctrl-C stops on these too) the first time;
the atomic writers remove their temporary files as it passes, and the command line then
abandons the cache's background writes (:meth:`memtui.cache.store.ModelCache.abandon`) and
prints one line. A signal that arrives while the process is already ending is ignored,
unless the ending has taken more than ``STUCK_AFTER_S`` seconds: then it acts as it would
by default, so a process wedged in its clean-up can still be stopped.
"""

from __future__ import annotations

import os
import signal
import time

from memtui.errors import Interrupted

HANDLED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
STUCK_AFTER_S = 5.0


# Between the interpreter's start and the handlers below, a signal would interrupt an
# import with a traceback; the entry point holds it instead (hold_early_signals), and the
# handlers raise it as soon as they are in place.
_held: list[int] = []
_originals: dict[int, object] = {}


def _hold(signum: int, frame) -> None:
    if not _held:
        _held.append(signum)


def hold_early_signals() -> None:
    """Keep the first of the signals above for :class:`ExitSignals` to act on: called by
    the entry point before anything is imported."""
    for signum in HANDLED:
        try:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue
            _originals[signum] = previous
            signal.signal(signum, _hold)
        except (ValueError, OSError):
            pass


class ExitSignals:
    """While installed (a context manager), the signals above raise Interrupted once."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._first_at = 0.0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> ExitSignals:
        for signum in HANDLED:
            try:
                previous = signal.getsignal(signum)
                if previous is signal.SIG_IGN:  # nohup, or a parent that wants it ignored: keep that
                    continue
                signal.signal(signum, self._on_signal)
                self._previous[signum] = _originals.get(signum, previous) if previous is _hold else previous
            except (ValueError, OSError):  # not the main thread: signals are someone else's business
                pass
        if _held:
            self._on_signal(_held.pop(), None)
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def release(self) -> None:
        """Put back the handlers there were before (a command whose signals are its own)."""
        for signum, handler in self._previous.items():
            try:
                signal.signal(signum, handler)
            except (ValueError, OSError, TypeError):
                pass
        self._previous.clear()

    def _on_signal(self, signum: int, frame) -> None:
        if self.received is None:
            self.received = signum
            self._first_at = time.monotonic()
            raise Interrupted(signum)
        if time.monotonic() - self._first_at > STUCK_AFTER_S:
            from memtui.atomic import remove_temp_files_being_written  # here: the handlers go in before slow imports

            remove_temp_files_being_written()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def ending(self, signum: int) -> None:
        """The process is ending on ``signum`` (also when it came as a plain Ctrl-C that
        was raised before these handlers were in place): later signals are ignored."""
        if self.received is None:
            self.received = signum
            self._first_at = time.monotonic()
