"""Textual's Linux driver, made safe against the terminal going away under it.

When the terminal hangs up (an SSH connection drops, ``tmux kill-session``), every write
to it fails with EIO, and the kernel sends the process SIGHUP and SIGCONT. Two things in
Textual's ``LinuxDriver`` then combine into a process that never exits:

- its output thread ends at the first failed write, but the queue feeding it is bounded
  (30 writes): the repaints and the terminal-restoring writes that follow fill it, and the
  next write, or ``close()`` queueing its stop marker, waits for room forever;
- its SIGCONT handler restarts application mode as if coming back from Ctrl+Z, even though
  nothing was suspended: a second output thread (which dies at once, on the dead terminal)
  replaces the first, and a second input thread starts.

:class:`HangupSafeDriver` writes through :class:`TerminalWriter`, which keeps draining its
queue after the terminal fails and drops the output from then on, and it resumes only
after a suspension. Only public driver methods are overridden; Textual's own output
thread is still started by ``LinuxDriver.start_application_mode`` but is never written to.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import IO

from textual.drivers.linux_driver import LinuxDriver

MAX_QUEUED_WRITES = 30  # as Textual: a terminal slower than the app slows the app down
STOP_TIMEOUT = 5.0  # seconds close() waits for a live but stalled terminal to take the output


class TerminalWriter(threading.Thread):
    """Writes text to the terminal in the background, and never stops draining its queue
    before :meth:`stop`: once a write fails, ``broken`` is set and output is dropped."""

    def __init__(self, file: IO[str]) -> None:
        super().__init__(daemon=True, name="memtui-output")
        self._queue: queue.Queue[str | None] = queue.Queue(MAX_QUEUED_WRITES)
        self._file = file
        self._stopping = False
        self.broken = False

    def write(self, text: str) -> None:
        if self.broken or self._stopping:
            return
        self._queue.put(text)  # the thread drains the queue until stop(), broken or not

    def run(self) -> None:
        get, pending = self._queue.get, self._queue.qsize
        while (text := get()) is not None:
            if self.broken:
                continue
            try:
                self._file.write(text)
                if not pending():
                    self._file.flush()
            except (OSError, ValueError):  # EIO after a hang-up, or a closed stream
                self.broken = True
        if not self.broken:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self.broken = True

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Write what is queued, then end the thread. Waits at most about ``timeout`` seconds
        each for room in the queue and for the end: only a terminal that is still connected
        but takes no output can hold the thread in a write that long."""
        self._stopping = True
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return  # a daemon thread: it does not keep the process alive
        self.join(timeout)


class HangupSafeDriver(LinuxDriver):
    """``LinuxDriver`` whose output survives a hang-up and which ignores a stray SIGCONT."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._terminal_writer: TerminalWriter | None = None
        self._application_suspended = False

    def start_application_mode(self) -> None:
        if self._terminal_writer is None:
            self._terminal_writer = TerminalWriter(sys.__stderr__)
            self._terminal_writer.start()
        super().start_application_mode()

    def write(self, data: str) -> None:
        writer = self._terminal_writer
        if writer is not None:  # nothing is shown outside application mode
            writer.write(data)

    def close(self) -> None:
        writer, self._terminal_writer = self._terminal_writer, None
        if writer is not None:
            writer.stop()
        super().close()  # stops Textual's own output thread, idle and so never stuck

    def suspend_application_mode(self) -> None:
        self._application_suspended = True
        super().suspend_application_mode()

    def resume_application_mode(self) -> None:
        # A hang-up sends SIGCONT with SIGHUP; restarting then would only write to a dead
        # terminal and start a second input thread.
        if not self._application_suspended:
            return
        self._application_suspended = False
        super().resume_application_mode()
