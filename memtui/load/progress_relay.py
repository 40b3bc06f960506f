"""Passing a decoder's progress to the caller, and keeping what the caller raised."""

from __future__ import annotations

from memtui.load.source import ProgressFn


class ProgressRelay:
    """Calls the caller's progress callback and remembers what it raised (a cancel), so
    that exception is not mistaken for a decoding failure on its way out of a decoder."""

    def __init__(self, progress: ProgressFn) -> None:
        self._progress = progress
        self.error: BaseException | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        try:
            self._progress(stage, done, total)
        except BaseException as exc:
            self.error = exc
            raise
