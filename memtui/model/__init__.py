"""The indexed, columnar snapshot. Pure: never imports textual or torch."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from memtui.load import ProgressFn, read_snapshot
from memtui.load.normalize import normalize
from memtui.load.stream import StreamFallback, stream_snapshot
from memtui.model.frames import StackToken
from memtui.model.snapshot import Annotation, DeviceModel, Match, Snapshot, assemble_model, build_model, device_count
from memtui.model.trace import ModelTables, TraceBuilder

__all__ = ["Annotation", "DeviceModel", "Match", "Snapshot", "build_model", "open_snapshot", "set_default_cache"]

log = logging.getLogger("memtui.load")


_DEFAULT = object()
_default_cache = None


def set_default_cache(cache) -> None:
    """The :class:`memtui.cache.ModelCache` that ``open_snapshot`` uses unless told otherwise
    (the command line sets it from ``--cache-dir``/``--no-cache``; None turns it off)."""
    global _default_cache
    _default_cache = cache


def get_default_cache():
    return _default_cache


def open_snapshot(
    path: str | os.PathLike,
    progress: ProgressFn | None = None,
    *,
    streaming: bool = True,
    cache: object = _DEFAULT,
) -> Snapshot:
    """Read and index a snapshot file. Raises SnapshotError with a one-line message.

    ``cache`` is a :class:`memtui.cache.ModelCache`, None for none, or by default the one
    given to :func:`set_default_cache`. A built model is written to it in a background
    thread. ``streaming`` chooses the streaming decoder, which falls back to the plain
    path by itself.
    """
    if cache is _DEFAULT:
        cache = _default_cache
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
