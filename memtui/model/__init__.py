"""The indexed, columnar snapshot. Pure: never imports textual or torch."""

from __future__ import annotations

import os

from memtui.load import ProgressFn, read_snapshot
from memtui.model.snapshot import Annotation, DeviceModel, Match, Snapshot, build_model

__all__ = ["Annotation", "DeviceModel", "Match", "Snapshot", "build_model", "open_snapshot"]


def open_snapshot(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot:
    """Read and index a snapshot file. Raises SnapshotError with a one-line message."""
    raw = read_snapshot(path, progress)
    if progress is not None:
        progress("indexing", 0, 1)
    size = os.path.getsize(path)
    snapshot = build_model(raw, os.fspath(path), size)
    del raw
    if progress is not None:
        progress("indexing", 1, 1)
    return snapshot
