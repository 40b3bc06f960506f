"""Recording sessions: ``memtui.record(path)`` and ``Stepper(start, end)``.

A session turns history recording on, writes a snapshot, and turns recording off again,
but only if it was the one that turned it on: a ``with memtui.record(...)`` inside a script
that ``memtui run`` already records must not stop the outer recording.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from memtui.errors import UsageError
from memtui.record import backend, steps
from memtui.record.files import rank_path, write_snapshot

# The ring buffer's size. torch's own default keeps every event forever, which on a long
# run grows host memory without bound; 100,000 events covers many training steps.
DEFAULT_MAX_ENTRIES = 100_000
STACKS = ("python", "all")
CONTEXTS = ("all", "alloc", "state", None)


@dataclass(frozen=True)
class Options:
    """How to record: ring-buffer size, which stacks, and when stacks are captured."""

    max_entries: int = DEFAULT_MAX_ENTRIES
    stacks: str = "python"
    context: str | None = "all"

    def __post_init__(self) -> None:
        if not isinstance(self.max_entries, int) or self.max_entries < 1:
            raise UsageError(f"max_entries must be a positive whole number, not {self.max_entries!r}")
        if self.stacks not in STACKS:
            raise UsageError(f"stacks must be 'python' or 'all', not {self.stacks!r}")
        if self.context not in CONTEXTS:
            raise UsageError(f"context must be 'all', 'alloc', 'state' or None, not {self.context!r}")


class Session:
    """One stretch of recording, and the snapshots written from it."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.owned = False  # True when this session turned recording on (and so turns it off)
        self.active = False
        self._torch = None

    def start(self) -> None:
        torch = backend.cuda_torch()
        self._torch = torch
        if not backend.history_enabled(torch):
            opts = self.options

            def turn_on() -> None:
                backend.start_history(torch, max_entries=opts.max_entries, stacks=opts.stacks, context=opts.context)

            steps.reopen_marker(turn_on)
            self.owned = True
        self.active = True

    def dump(self, path: str | os.PathLike) -> str:
        torch = self._torch or backend.cuda_torch()
        return write_snapshot(backend.take_snapshot(torch), path)

    def stop(self) -> None:
        if self.owned and self._torch is not None:
            backend.stop_history(self._torch)
        self.owned = False
        self.active = False


class Recording:
    """``with memtui.record("run.pickle"):`` records the block and writes one snapshot at its end.

    The snapshot is also written when the block ends with an exception (an OOM included),
    then the exception goes on. Under a launcher the file name gets the rank
    (``run.rank1.pickle``), and ``.xz``/``.gz``/``.bz2`` endings compress it.
    ``start()``/``stop()`` do the same without a ``with`` block.
    """

    def __init__(
        self,
        path: str | os.PathLike = "memory.pickle",
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        stacks: str = "python",
        context: str | None = "all",
    ) -> None:
        self.path = rank_path(path)
        self.written: str | None = None
        self._session = Session(Options(max_entries, stacks, context))

    def start(self) -> Recording:
        self._session.start()
        return self

    def stop(self) -> str:
        """Write the snapshot, stop recording (if this started it); returns the path written."""
        try:
            self.written = self._session.dump(self.path)
        finally:
            self._session.stop()
        return self.written

    def __enter__(self) -> Recording:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.stop()
        except Exception as err:
            if exc_type is None:
                raise
            # Never hide the script's own exception behind a failed dump.
            print(f"memtui: could not write {self.path}: {err}", file=sys.stderr)


class Stepper:
    """Record steps ``start`` to ``end - 1`` only (``end=None``: until ``close()``).

    Steps come from ``memtui.record.step()``; recording starts when step ``start`` begins and
    the snapshot is written when step ``end`` begins, so warm-up steps stay out of the file::

        with memtui.record.Stepper(5, 8, "steps.pickle"):
            for batch in loader:
                train(batch)
                memtui.record.step()
    """

    def __init__(
        self,
        start: int,
        end: int | None = None,
        path: str | os.PathLike | None = None,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        stacks: str = "python",
        context: str | None = "all",
        write: bool = True,
    ) -> None:
        if start < 0 or (end is not None and end <= start):
            raise UsageError(f"Stepper({start}, {end}): need 0 <= start < end")
        self.start, self.end = start, end
        default = f"steps{start}-{end}.pickle" if end is not None else f"steps{start}-.pickle"
        self.path = rank_path(path if path is not None else default)
        self.write = write  # False: record the range but write nothing (an OOM dump still sees it)
        self.written: str | None = None
        self.finished = False
        self._session = Session(Options(max_entries, stacks, context))
        self._attached = False

    @property
    def recording(self) -> bool:
        return self._session.active

    def attach(self) -> Stepper:
        """Start following ``step()`` calls (and record now if the range has begun)."""
        if not self._attached:
            steps.add_listener(self._on_step)
            self._attached = True
            self._on_step(steps.current_step())
        return self

    def close(self) -> str | None:
        """Write what was recorded (if the range began and has not been written); detach."""
        if self.recording:
            self._finish()
        self._detach()
        return self.written

    @staticmethod
    def step() -> int:
        return steps.step()

    def __enter__(self) -> Stepper:
        return self.attach()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.close()
        except Exception as err:
            if exc_type is None:
                raise
            print(f"memtui: could not write {self.path}: {err}", file=sys.stderr)

    def _on_step(self, n: int) -> None:
        if self.finished:
            return
        in_range = n >= self.start and (self.end is None or n < self.end)
        if in_range and not self.recording:
            self._session.start()
        elif self.recording and self.end is not None and n >= self.end:
            self._finish()

    def _finish(self) -> None:
        self.finished = True
        self._detach()
        try:
            if self.write:
                self.written = self._session.dump(self.path)
        finally:
            self._session.stop()

    def _detach(self) -> None:
        if self._attached:
            steps.remove_listener(self._on_step)
            self._attached = False
