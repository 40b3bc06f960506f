"""Running an app that owns the terminal: signals end it cleanly, a crash gives one line.

Textual restores the terminal (main screen, cursor, mouse and keyboard modes) when the
app exits normally, but SIGTERM or SIGHUP (an SSH connection dropping) would kill the
process with the terminal still in application mode, and an exception would print a long
traceback with local variables. Here the first of those signals asks the app to exit,
through the event loop, so the normal exit path runs; from then on any of them acts as it
would by default, and a watchdog ends the process if the exit has not happened within
``EXIT_GRACE`` seconds (with the terminal's modes put back as far as it still can be), so
a signal always stops the app even when its event loop is wedged. The terminal driver is
:class:`memtui.tui.terminal_driver.HangupSafeDriver`, so that a terminal that went away cannot
wedge the exit in the first place. An unexpected exception is reported by
:func:`memtui.crash.report_crash` once the terminal is restored.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from textual.app import App

from memtui.atomic import remove_temp_files_being_written
from memtui.crash import report_crash

try:
    import termios

    TERMINAL_ERRORS: tuple[type[Exception], ...] = (OSError, termios.error)
except ImportError:  # not a POSIX terminal
    termios = None  # type: ignore[assignment]
    TERMINAL_ERRORS = (OSError,)

EXIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))
EXIT_GRACE = 3.0  # seconds from an exit signal to the end of the process, at most
# What Textual's LinuxDriver.stop_application_mode writes, and mouse reporting off: what a
# forced exit writes to give the terminal back.
RESTORE_SEQUENCE = (b"\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?7h"
                    b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l")


class AppOutcome:
    """How a run ended: the exit status, and the signal or the exception that ended it."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.error: BaseException | None = None


def run_in_terminal(app: App, cache_root: str | None = None) -> int:
    """Run ``app`` (see the module docstring); the exit status.

    128 + the signal number after a signal, :data:`memtui.crash.CRASH_EXIT` after a crash
    (reported under ``cache_root``, the cache folder of this run, or the default one),
    else the app's return code.
    """
    outcome = run_app_guarded(app)
    if outcome.error is not None:
        return report_crash(outcome.error, f"running {type(app).__name__}", cache_root=cache_root)
    if outcome.signal is not None:
        return 128 + outcome.signal
    return app.return_code or 0


def run_app_guarded(app: App) -> AppOutcome:
    outcome = AppOutcome()
    _catch_crash(app, outcome)
    _use_hangup_safe_driver(app)
    with _exit_on_signals(app, outcome):
        app.run()
    return outcome


def _use_hangup_safe_driver(app: App) -> None:
    try:
        from textual.drivers.linux_driver import LinuxDriver

        from memtui.tui.terminal_driver import HangupSafeDriver
    except ImportError:  # no termios: not a Linux or macOS terminal
        return
    if app.driver_class is LinuxDriver:  # not a driver chosen by TEXTUAL_DRIVER (textual-serve)
        app.driver_class = HangupSafeDriver


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
    watchdog = _ExitWatchdog()

    def on_signal(signum: int, frame) -> None:
        for each in previous:  # from now on, any of them acts at once
            signal.signal(each, signal.SIG_DFL if each != signal.SIGINT else signal.default_int_handler)
        if outcome.signal is None:
            outcome.signal = signum
        watchdog.alarm(128 + outcome.signal)
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
    # The kernel may hand a signal to any thread; Python runs the handler on the main thread
    # only, which a wedged loop never frees. The wakeup fd is written at once, whichever
    # thread took the signal, so the watchdog starts its count from there too.
    try:
        old_wakeup = signal.set_wakeup_fd(watchdog.wakeup_fd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old_wakeup = None
    watchdog.start()
    try:
        yield
    finally:
        if old_wakeup is not None:
            try:
                signal.set_wakeup_fd(old_wakeup)
            except (ValueError, OSError):
                pass
        for signum, handler in previous.items():
            try:
                signal.signal(signum, handler)
            except (ValueError, OSError):
                pass
        watchdog.disarm()


class _ExitWatchdog(threading.Thread):
    """Ends the process ``EXIT_GRACE`` seconds after :meth:`alarm` unless :meth:`disarm`
    comes first. :meth:`alarm` is called from a signal handler, which may have interrupted
    the main thread anywhere, even inside a lock: it only writes to a pipe."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="memtui-exit-watchdog")
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # signal.set_wakeup_fd takes only a non-blocking fd
        self.wakeup_fd = self._write
        self._code = 1
        self._terminal = _TerminalModes()

    def alarm(self, code: int) -> None:
        self._code = code
        os.write(self._write, b"a")

    def disarm(self) -> None:
        os.write(self._write, b"d")
        self.join()
        os.close(self._read)
        os.close(self._write)

    def run(self) -> None:
        # Bytes on the pipe: "a" (alarm), "d" (disarm), or a signal's number written by the
        # interpreter's wakeup fd (any handled signal: only the exit signals count).
        while True:
            byte = os.read(self._read, 1)
            if byte == b"d":
                return
            if byte == b"a" or (byte and byte[0] in EXIT_SIGNALS):
                if byte != b"a":
                    self._code = 128 + byte[0]
                break
        deadline = time.monotonic() + EXIT_GRACE
        while (left := deadline - time.monotonic()) > 0:
            if select.select([self._read], [], [], left)[0] and os.read(self._read, 1) == b"d":
                return  # disarmed: the app has exited within the grace period
        self._terminal.restore()
        remove_temp_files_being_written()  # a cache or export still being written leaves nothing behind
        os._exit(self._code)


class _TerminalModes:
    """The terminal's modes before the app changed them, to give them back on a forced exit."""

    def __init__(self) -> None:
        self._input = self._output = -1
        self._attrs = None
        try:
            self._input, self._output = sys.__stdin__.fileno(), sys.__stderr__.fileno()
            if termios is not None and os.isatty(self._input):
                self._attrs = termios.tcgetattr(self._input)
        except (AttributeError, ValueError, *TERMINAL_ERRORS):  # no terminal
            pass

    def restore(self) -> None:
        # Never block, and never write from the background (SIGTTOU would stop the process):
        # the terminal may be stalled, gone, or handed to another process group.
        if self._attrs is None or not self._in_foreground():
            return
        try:
            if os.isatty(self._output) and select.select([], [self._output], [], 0)[1]:
                os.write(self._output, RESTORE_SEQUENCE)
            termios.tcsetattr(self._input, termios.TCSANOW, self._attrs)
        except (ValueError, *TERMINAL_ERRORS):
            pass

    def _in_foreground(self) -> bool:
        try:
            return os.tcgetpgrp(self._input) == os.getpgrp()
        except OSError as exc:  # ENOTTY: not the controlling terminal, so no job control
            return exc.errno == errno.ENOTTY
