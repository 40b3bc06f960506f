"""Stopping a call's work when the client cancels it or goes away.

A call runs in a worker thread while the event loop waits for it; cancelling the wait
does not stop the thread, which would keep the one-call-at-a-time lock (and a core) for
as long as the analysis takes: tens of seconds on a large file. So a cancelled call's
thread is stopped: the load's progress reports raise :class:`CallCancelled`, and the
thread is sent the same exception (``PyThreadState_SetAsyncExc``), which Python raises at
the thread's next line of Python code, between two numpy operations. The lock is taken
before the thread can be interrupted and released by ``with``, so it is never left held.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class CallCancelled(Exception):
    """The client cancelled the call; its work stops here."""


def _send(thread_id: int, exception: type[BaseException] | None) -> None:
    # None clears an exception that was sent and not raised yet.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception else None)


class Cancellable:
    """One call's work: :meth:`running` around it in its thread, :meth:`cancel` from anywhere."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._thread: int | None = None
        self._sent = False
        self.requested = False
        self.finished = threading.Event()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._mutex:
            if self.requested:
                raise CallCancelled
            self._thread = threading.get_ident()
        try:
            yield
        finally:
            with self._mutex:
                self._thread = None
                if self._sent:
                    _send(threading.get_ident(), None)  # not raised yet: it must not hit the thread's next job
            self.finished.set()

    def check(self) -> None:
        if self.requested:
            raise CallCancelled

    def cancel(self) -> None:
        with self._mutex:
            self.requested = True
            if self._thread is not None and not self._sent:
                _send(self._thread, CallCancelled)
                self._sent = True

    def progress(self, report: Callable[[str, int, int], None] | None) -> Callable[[str, int, int], None]:
        """A progress callback that stops a cancelled load, then passes the report on."""

        def checked(stage: str, done: int, total: int) -> None:
            self.check()
            if report is not None:
                report(stage, done, total)

        return checked
