"""The one way to open a snapshot: file → :mod:`memtui.load` → :mod:`memtui.model`.

The model cache is an argument, never a process-wide setting: the command line decides
it once from ``--cache-dir``/``--no-cache`` and hands it down; a library caller or a test
passes its own, or none. The model itself imports nothing from the loader: it is built
here from the decoded dicts and trace columns.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from memtui.load import ProgressFn, read_snapshot
from memtui.load.normalize import normalize
from memtui.load.stream import StreamFallback, stream_snapshot
from memtui.model import Snapshot, build_model
from memtui.model.frames import StackToken
from memtui.model.snapshot import assemble_model, device_count
from memtui.model.trace import ModelTables, TraceBuilder

__all__ = ["ModelStore", "open_plain", "open_snapshot", "open_streaming"]

log = logging.getLogger("memtui.load")


class ModelStore(Protocol):
    """What :func:`open_snapshot` needs of a model cache (:class:`memtui.cache.ModelCache`)."""

    def load(self, path: str | os.PathLike) -> Snapshot | None: ...

    def store(self, path: str | os.PathLike, snapshot: Snapshot, background: bool = False) -> None: ...


def open_snapshot(
    path: str | os.PathLike,
    progress: ProgressFn | None = None,
    *,
    streaming: bool = True,
    cache: ModelStore | None = None,
) -> Snapshot:
    """Read and index a snapshot file. Raises SnapshotError with a one-line message.

    ``cache`` (a :class:`memtui.cache.ModelCache`, or None for none) is read first; a model
    built here is written to it in a background thread. ``streaming`` chooses the
    streaming decoder, which falls back to the plain path by itself.
    """
    if cache is not None:
        found = cache.load(path)
        if found is not None:
            if progress is not None:
                progress("indexing", 1, 1)
            return found
    snapshot = open_streaming(path, progress) if streaming else None
    if snapshot is None:
        snapshot = open_plain(path, progress)
    if cache is not None:
        cache.store(path, snapshot, background=True)
    return snapshot


def open_plain(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot:
    """The reference path: ``pickle.load`` (restricted), then the model."""
    with _gc_paused():
        raw = read_snapshot(path, progress)
        if progress is not None:
            progress("indexing", 0, 1)
        snapshot = build_model(raw, os.fspath(path), os.path.getsize(path))
        del raw
    if progress is not None:
        progress("indexing", 1, 1)
    return snapshot


def open_streaming(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot | None:
    """The streaming decoder's model, or None when the file needs the plain path."""
    tables = ModelTables.new()

    def make_consumer(ordinal: int) -> TraceBuilder:
        return TraceBuilder(tables, f"device trace {ordinal}", strict=True)

    try:
        with _gc_paused():
            raw, sinks = stream_snapshot(path, make_consumer, StackToken, progress)
    except StreamFallback as exc:
        log.debug("%s: read with the plain loader (%s)", os.fspath(path), exc)
        return None
    _give_back_freed_memory()
    raw = normalize(raw, os.path.basename(os.fspath(path)))
    if progress is not None:
        progress("indexing", 0, 1)
    builders = {sink.device: sink.consumer for sink in sinks}
    sinks.clear()
    columns = []
    for d in range(device_count(raw)):
        builder = builders.pop(d, None) or TraceBuilder(tables, f"device {d} trace")
        columns.append(builder.finish())
        del builder
        _give_back_freed_memory()
    snapshot = assemble_model(raw, columns, tables, os.fspath(path), os.path.getsize(path))
    _give_back_freed_memory()
    if progress is not None:
        progress("indexing", 1, 1)
    return snapshot


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Decoding makes millions of short-lived containers and no cycles: the cyclic
    collector would only rescan the frame lists kept in the memo, again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _give_back_freed_memory() -> None:
    """Decoding frees gigabytes in small pieces that glibc keeps for later; hand them back
    so the resident size reflects the model. Elsewhere than glibc this does nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
