"""Running an app that owns the terminal: signals end it cleanly, a crash gives one line.

Textual restores the terminal (main screen, cursor, mouse and keyboard modes) when the
app exits normally, but SIGTERM or SIGHUP (an SSH connection dropping) would kill the
process with the terminal still in application mode, and an exception would print a long
traceback with local variables. Here each of those signals asks the app to exit, through
the event loop, so the normal exit path runs; a second one of the same signal acts as it
would by default, so a stuck process can still be stopped. An unexpected exception is
reported by :func:`memtui.crash.report_crash` once the terminal is restored.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from textual.app import App

from memtui.crash import report_crash

EXIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


class AppOutcome:
    """How a run ended: the exit status, and the signal or the exception that ended it."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.error: BaseException | None = None


def run_in_terminal(app: App) -> int:
    """Run ``app`` (see the module docstring); the exit status.

    128 + the signal number after a signal, :data:`memtui.crash.CRASH_EXIT` after a crash,
    else the app's return code.
    """
    outcome = run_app_guarded(app)
    if outcome.error is not None:
        return report_crash(outcome.error, f"running {type(app).__name__}")
    if outcome.signal is not None:
        return 128 + outcome.signal
    return app.return_code or 0


def run_app_guarded(app: App) -> AppOutcome:
    outcome = AppOutcome()
    _catch_crash(app, outcome)
    with _exit_on_signals(app, outcome):
        app.run()
    return outcome


def _catch_crash(app: App, outcome: AppOutcome) -> None:
    # Textual's handler ends the app and queues a rich traceback for after the terminal is
    # restored; the traceback is dropped here (the crash report holds it) and the exception
    # kept. Both are private Textual names: if they change, Textual's own output remains.
    original = getattr(app, "_handle_exception", None)
    if original is None:
        return

    def handle(error: Exception) -> None:
        if outcome.error is None:
            outcome.error = error
        original(error)
        renderables = getattr(app, "_exit_renderables", None)
        if isinstance(renderables, list):
            renderables.clear()

    app._handle_exception = handle  # type: ignore[method-assign]


@contextmanager
def _exit_on_signals(app: App, outcome: AppOutcome) -> Iterator[None]:
    def on_signal(signum: int, frame) -> None:
        signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT else signal.default_int_handler)
        if outcome.signal is None:
            outcome.signal = signum
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # before the app started or after it stopped: nothing to restore
            raise SystemExit(128 + signum) from None
        # Handlers run between two bytecodes of whatever the loop was doing; the exit is
        # queued for the loop to run as soon as it regains control.
        loop.call_soon_threadsafe(app.exit, None, 128 + signum)

    previous = {}
    for signum in EXIT_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, on_signal)
        except (ValueError, OSError):  # not the main thread, or not settable here
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            try:
                signal.signal(signum, handler)
            except (ValueError, OSError):
                pass
