"""Snapshots at the moment of a CUDA out-of-memory error.

The allocator calls its OOM observers after it has recorded the ``oom`` trace entry and
before it raises, so a snapshot taken there shows the state that failed even when the
script catches the exception and goes on. torch offers no way to detach an observer, so
memtui attaches one per process and dispatches to the dumps registered with ``on_oom``.
"""

from __future__ import annotations

import os
import sys

from memtui.record import backend
from memtui.record.files import rank_path, with_tag
from memtui.record.recording import DEFAULT_MAX_ENTRIES, Options, Session
from memtui.units import format_bytes

_dumps: list[OomDump] = []
_listeners: list = []  # other callables told of each OOM (live serving), after the dumps
_attached = False


class OomDump:
    """Writes a snapshot to ``path`` at each CUDA OOM, up to ``max_dumps`` times.

    The first OOM goes to ``path``, later ones to ``NAME.2.pickle``, ``NAME.3.pickle``, ...
    ``paths`` lists what was written.
    """

    def __init__(self, path: str | os.PathLike, max_dumps: int = 1, quiet: bool = False) -> None:
        self.path = rank_path(path)
        self.max_dumps = max_dumps
        self.quiet = quiet
        self.paths: list[str] = []
        self.ooms = 0  # OOMs seen, written or not
        self._session = Session(Options())

    def remove(self) -> None:
        """Stop dumping on OOM (the observer stays attached but does nothing for this one)."""
        if self in _dumps:
            _dumps.remove(self)

    def _target(self) -> str:
        n = len(self.paths) + 1
        return self.path if n == 1 else with_tag(self.path, str(n))

    def _on_oom(self, device: int, requested: int, device_allocated: int, device_free: int) -> None:
        self.ooms += 1
        if len(self.paths) >= self.max_dumps:
            return
        target = self._target()
        written = self._session.dump(target)
        self.paths.append(written)
        if not self.quiet:
            print(
                f"memtui: CUDA out of memory on device {device} asking for {format_bytes(requested)} "
                f"({format_bytes(device_free)} free on the device); snapshot written to {written}",
                file=sys.stderr,
                flush=True,
            )


def _observer(device, alloc, device_alloc, device_free) -> None:
    # Runs inside the allocator's failing malloc: an exception escaping here would replace
    # the OutOfMemoryError the script expects, so every failure is reported and swallowed.
    for dump in list(_dumps):
        try:
            dump._on_oom(int(device), int(alloc), int(device_alloc), int(device_free))
        except BaseException as exc:
            print(f"memtui: could not write the OOM snapshot {dump.path}: {exc}", file=sys.stderr, flush=True)
    for listener in list(_listeners):
        try:
            listener(int(device), int(alloc), int(device_alloc), int(device_free))
        except BaseException as exc:
            print(f"memtui: live serving could not report the OOM: {exc}", file=sys.stderr, flush=True)


def add_listener(listener) -> None:
    """Call ``listener(device, requested, device_allocated, device_free)`` at each CUDA OOM,
    from inside the failing allocation (so what it reads is the state that failed)."""
    global _attached
    if not _attached:
        backend.attach_oom_observer(backend.cuda_torch(), _observer)
        _attached = True
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def on_oom(
    path: str | os.PathLike = "oom.pickle",
    *,
    max_dumps: int = 1,
    record: bool = True,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    stacks: str = "python",
    context: str | None = "all",
    quiet: bool = False,
) -> OomDump:
    """Write a snapshot to ``path`` when CUDA runs out of memory.

    With ``record=True`` (the default) history recording is turned on if nothing records
    yet, so this one call is enough for a snapshot that shows how the memory filled up.
    Returns the ``OomDump``; its ``paths`` lists the files written.
    """
    global _attached
    torch = backend.cuda_torch()
    dump = OomDump(path, max_dumps=max_dumps, quiet=quiet)
    if record:
        Session(Options(max_entries, stacks, context)).start()
    if not _attached:
        backend.attach_oom_observer(torch, _observer)
        _attached = True
    _dumps.append(dump)
    return dump
