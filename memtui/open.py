"""The one way to open a snapshot: file → :mod:`memtui.load` → :mod:`memtui.model`.

The readers a file may need besides the compiled scanner (the shape check, the streaming
decoder, the plain path) are imported when one is needed: on the fast path they were 7 ms of
every command's imports.

The model cache is an argument, never a process-wide setting: the command line decides
it once from ``--cache-dir``/``--no-cache`` and hands it down; a library caller or a test
passes its own, or none. The model itself imports nothing from the loader: it is built
here from the decoded dicts and trace columns.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Protocol

import numpy as np

from memtui import logs
from memtui.load import ahead
from memtui.load.fast import FastFallback, Scanned, scan_snapshot
from memtui.load.fast import available as fast_available
from memtui.load.normalize import normalize
from memtui.load.source import ProgressFn, SourceInfo, inspect_source
from memtui.model import Snapshot, build_model, column_passes
from memtui.model.actions import ActionTable
from memtui.model.columns import narrow_type, narrowest
from memtui.model.frames import NO_STACK, StackToken
from memtui.model.lifetimes import Lifetimes, paired_elsewhere
from memtui.model.snapshot import PairedLives, assemble_model, device_count
from memtui.model.trace import NARROW_COLUMNS, ModelTables, TraceBuilder, TraceColumns

__all__ = ["ModelStore", "open_fast", "open_plain", "open_snapshot", "open_streaming"]


class ModelStore(Protocol):
    """What :func:`open_snapshot` needs of a model cache (:class:`memtui.cache.store.ModelCache`)."""

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

    ``cache`` (a :class:`memtui.cache.store.ModelCache`, or None for none) is read first; a model
    built here is written to it in a background thread. ``streaming`` chooses the
    streaming decoder, which falls back to the plain path by itself.
    """
    if cache is not None:
        found = cache.load(path)
        if found is not None:
            ahead.discard()  # a scan the command line started, guessing there was no model kept
            if progress is not None:
                progress("indexing", 1, 1)
            return found
    info = inspect_source(path)
    # A file that is no snapshot is refused before anything big is built. The compiled
    # scanner builds nothing before it has seen what the shape check looks for (it hands over
    # a file whose top is not a dict, a frame longer than picklers write, an entry repeated
    # by reference), and reads a compressed file through the same bound on inflation as
    # every reader: the check waits until the scanner hands the file over, and runs only
    # then, before the decoders that would build it.
    scanner_first = streaming and fast_available()
    if not scanner_first:
        from memtui.load.shape import check_start

        ahead.discard()  # a scan the command line started is not this open's (its guess was wrong)
        check_start(info)
    snapshot = _open_decoded(path, progress, info, checked=not scanner_first) if streaming else None
    if snapshot is None:
        snapshot = open_plain(path, progress)
    if cache is not None:
        cache.store(path, snapshot, background=True)
    return snapshot


def open_plain(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot:
    """The reference path: ``pickle.load`` (restricted), then the model."""
    from memtui.load.read import read_snapshot

    with _gc_paused():
        raw = read_snapshot(path, progress)
        if progress is not None:
            progress("indexing", 0, 1)
        snapshot = build_model(raw, os.fspath(path), os.path.getsize(path))
        del raw
    if progress is not None:
        progress("indexing", 1, 1)
    return snapshot


# From this size a file the fast path hands to the streaming decoder for a trace-entry key it
# does not read (a field a newer torch added) is said to the user: it reads several times slower.
NOTICE_FROM_BYTES = 64 << 20
UNKNOWN_FIELD = "a trace entry key the fast path does not read"  # the scanner's reason (src/memtui_native)


def _open_decoded(path: str | os.PathLike, progress: ProgressFn | None, info: SourceInfo,
                  checked: bool) -> Snapshot | None:
    """The fast path, else the streaming decoder; None when the file needs the plain path.
    ``checked``: the shape check was made (else it is made before the streaming decoder)."""
    snapshot, why = _fast(path, progress)
    if snapshot is not None:
        return snapshot
    if not checked:
        from memtui.load.shape import check_start

        check_start(info)
    if why is not None and why.refused:  # it names code: the plain path refuses it by name
        return None
    snapshot = open_streaming(path, progress)
    if snapshot is not None and why is not None and UNKNOWN_FIELD in str(why) \
            and snapshot.source_size >= NOTICE_FROM_BYTES:
        snapshot.load_notice = (f"{os.path.basename(os.fspath(path))} was read with the slower decoder: its trace "
                                "entries have a field the fast path does not know (a newer torch?); please report "
                                "it so the fast path learns it")
    return snapshot


def open_fast(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot | None:
    """The compiled scanner's model (memtui/load/fast), or None when the file (or this
    installation, built without a C compiler) needs the streaming decoder."""
    return _fast(path, progress)[0]


def _fast(path: str | os.PathLike, progress: ProgressFn | None) -> tuple[Snapshot | None, FastFallback | None]:
    try:
        # No collection while the model is built from the scan either (its frame lists and
        # tables are as many containers), and the memory the scan freed is handed back once,
        # after the model: handed back before it, the model's columns faulted it in again
        # (1M info --no-cache 0.97x; the same peak).
        with _gc_paused():
            scanned = scan_snapshot(path, progress)
            if progress is not None:
                progress("indexing", 0, 1)
            snapshot = _model_from_scan(scanned, path)
    except FastFallback as exc:
        logs.debug(logs.LOAD, "%s: read without the fast path (%s)", os.fspath(path), exc)
        return None, exc
    _give_back_freed_memory()
    if progress is not None:
        progress("indexing", 1, 1)
    return snapshot, None


# Trace columns from entry keys the scanner does not read (it hands a file with such a key
# to the streaming decoder), and what they hold when no entry has the key: the value of
# every row, or for a field that is not a column, a function making it.
_NOT_SCANNED = {"fwd": NO_STACK, "pool": -1, "pools": list}


def _model_from_scan(scanned: Scanned, path: str | os.PathLike) -> Snapshot:
    """The model from the scanner's columns and tables, built through the model's own
    tables so every id is the one the streaming decoder would give."""
    raw = normalize(scanned.raw, os.path.basename(os.fspath(path)))
    tables = ModelTables.new()
    code_of = [tables.actions.code(name) for name in scanned.actions]
    codes = np.asarray(code_of or [0], np.int16)
    paired = _lives_paired_ahead(scanned, code_of, tables.actions)
    # The scanner's stacks, in the order first seen, through the model's interning: its ids
    # are the model's, or fewer where the model takes two of the scanner's frames for one.
    frames = [{"filename": f, "line": line, "name": n, **dict(extras)} for f, line, n, extras in scanned.frames]
    flat, offsets = scanned.stack_flat.tolist(), scanned.stack_offsets.tolist()
    sids = np.full(len(offsets), NO_STACK, np.int32)  # the last one stands for "no stack" (-1)
    for s in range(len(offsets) - 1):
        sids[s] = tables.stacks.intern([frames[f] for f in flat[offsets[s]:offsets[s + 1]]])
    del frames, flat, offsets
    codes, sids = narrowest(codes), narrowest(sids)  # small tables: the gathers below come out narrow
    columns = []
    for d in range(device_count(raw)):
        empty = TraceBuilder(tables, f"device {d} trace").finish()
        if d >= len(scanned.traces):
            columns.append(empty)
            continue
        trace = scanned.traces[d]
        scanned.traces[d] = None  # each trace's buffers go as soon as it is a model column
        c = trace.columns
        ctx = narrowest(np.asarray([tables.strings.intern(v) for v in trace.ctx_values] or [0], np.int64))
        meta = narrowest(np.asarray([tables.strings.intern(v) for v in trace.meta_values] or [0], np.int64))
        # The scanner's local ids through the model's tables, and every column as narrow as
        # its values allow, a slice of rows at a time on the process's cores (model/slices.py).
        luts = {"action": codes, "stack": sids, "ctx": ctx, "meta": meta}
        scanned_columns = {f.name: c[f.name] for f in dataclasses.fields(TraceColumns) if f.name in c}
        values = _model_columns(scanned_columns, luts, {name: getattr(empty, name).dtype for name in scanned_columns})
        for f in dataclasses.fields(TraceColumns):
            if f.name in c:
                continue
            if f.name in _NOT_SCANNED and callable(_NOT_SCANNED[f.name]):
                values[f.name] = _NOT_SCANNED[f.name]()
            elif f.name in _NOT_SCANNED:
                values[f.name] = np.full(trace.rows, _NOT_SCANNED[f.name], np.int8)
            else:
                raise FastFallback(f"the model has a trace column the scanner does not fill ({f.name})")
        columns.append(TraceColumns(**values))
        del trace, c, values
    return assemble_model(raw, columns, tables, os.fspath(path), os.path.getsize(path), paired,
                          annotation_columns=scanned.annotations)


def _lives_paired_ahead(scanned: Scanned, code_of: list[int], actions: ActionTable) -> list[PairedLives | None]:
    """Each trace's allocation lives as the scan's thread pairs them (memtui/load/ahead.py),
    with the model's codes of the actions they are paired by, taken once the pairing is made
    (the model's columns are built meanwhile). None at all unless, for each role, the
    scanner's action ids it pairs by are exactly those the model's codes stand for (checked,
    not assumed)."""
    pairing = scanned.paired
    if pairing is None:
        return []
    role_codes, same_events = [], True
    for names in pairing.roles:
        codes = tuple(code for code in (actions.lookup(name) for name in names) if code is not None)
        took = {i for i, name in enumerate(scanned.actions) if name in names}
        same_events = same_events and took == {i for i, code in enumerate(code_of) if code in codes}
        role_codes.append(codes)
    if not same_events or len(role_codes) != 3:
        return []
    start, request, end = role_codes
    return [PairedLives(start, request, end, partial(_paired_lives, pairing, d, trace.rows))
            for d, trace in enumerate(scanned.traces)]


def _paired_lives(pairing: ahead.Pairing, d: int, rows: int) -> Lifetimes | None:
    """Trace ``d``'s lives from the scan thread's pairing, once made; None where it paired
    none (the model pairs that trace itself)."""
    per_trace = pairing.result()
    native = per_trace[d] if per_trace is not None and d < len(per_trace) else None
    return None if native is None else paired_elsewhere(native, rows)


def _model_columns(scanned: dict[str, np.ndarray], luts: dict[str, np.ndarray],
                   dtypes: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    """The model's trace columns from the scanner's: ids through ``luts`` (scanner id ->
    model id), then each of NARROW_COLUMNS as narrow as its values allow (as narrowest), the
    others typed as TraceBuilder types them, an infinite time made no time (NaN). Each lookup
    with its bounds, each other column's bounds and the times are one pass on the process's
    cores (model/column_passes.py)."""
    out = {}
    for name, source in scanned.items():
        if name not in NARROW_COLUMNS:
            out[name] = source.astype(dtypes[name], copy=False)
            continue
        if name in luts:
            looked_up = np.empty(len(source), luts[name].dtype)
            try:
                span = column_passes.remap(source, luts[name], looked_up)
            except column_passes.OutsideTable:  # never, from the scanner
                raise FastFallback(f"a {name} id outside the scanner's table") from None
            source = looked_up
        elif source.dtype.kind == "i":
            span = column_passes.bounds(source)
        else:
            out[name] = source  # as narrowest leaves one that is not of signed integers as it is
            continue
        # an empty column is int8, as narrowest gives it
        out[name] = source.astype(narrow_type(*span) if span is not None else np.int8, copy=False)
    if "time_us" in out:
        column_passes.finite_times(out["time_us"])  # the scanner's own memory, writable
    return out


def open_streaming(path: str | os.PathLike, progress: ProgressFn | None = None) -> Snapshot | None:
    """The streaming decoder's model, or None when the file needs the plain path."""
    from memtui.load.stream import StreamFallback, stream_snapshot

    tables = ModelTables.new()

    def make_consumer(ordinal: int) -> TraceBuilder:
        return TraceBuilder(tables, f"device trace {ordinal}", strict=True)

    try:
        with _gc_paused():
            raw, sinks = stream_snapshot(path, make_consumer, StackToken, progress)
    except StreamFallback as exc:
        logs.debug(logs.LOAD, "%s: read with the plain loader (%s)", os.fspath(path), exc)
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
