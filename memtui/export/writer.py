"""Writing a (filtered) snapshot as a memtui msgpack export (docs/export-format.md).

The file is a sequence of msgpack objects: the header, then ``snapshot`` (settings and
annotations), ``tables`` (actions, strings, frames, stacks: only those the exported rows
refer to), one ``device`` object per exported device (its segments and blocks), the
events in ``events`` chunks of at most ``CHUNK_EVENTS`` rows, and ``end``. Columns are
written straight from the model's numpy arrays, so there is no object per event.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import BinaryIO

import msgpack
import numpy as np

from memtui import __version__
from memtui.atomic import atomic_write, check_writable_target
from memtui.errors import UsageError
from memtui.export.tables import ExportTables, build_tables
from memtui.load.msgpack_export import FORMAT_NAME, FORMAT_VERSION
from memtui.model import Snapshot
from memtui.model.lifetimes import NONE
from memtui.query import compile_filter

CHUNK_EVENTS = 65536
ProgressFn = Callable[[str, int, int], None]
_UINT64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class ExportResult:
    path: str
    events: int  # rows written
    source_events: int  # rows in the exported devices' traces
    devices: tuple[int, ...]
    bytes: int


def export_snapshot(
    snapshot: Snapshot,
    path: str | os.PathLike,
    filter_text: str = "",
    device: int | None = None,
    include_stacks: bool = True,
    force: bool = False,
    progress: ProgressFn | None = None,
    rows: np.ndarray | None = None,
    selection: str | None = None,
) -> ExportResult:
    """Write the events of ``snapshot`` that match ``filter_text`` to ``path``, atomically.

    ``rows`` (sorted trace indices of ``device``) replaces the filter when the caller
    already knows which events it wants, e.g. a view the explorer built; ``selection``
    then says in the header what those rows are.
    """
    compiled = compile_filter(filter_text)
    devices = exported_devices(snapshot, device)
    path = check_writable_target(path, force, source=snapshot.source_path or None)
    if rows is not None:
        if device is None:
            raise UsageError("rows can only be given for one device")
        selections = {device: np.asarray(rows, np.int64)}
    else:
        selections = {d: compiled.indices(snapshot, d) for d in devices}
    header = make_header(snapshot, compiled.text, device, devices, include_stacks, selections, progress)
    if selection:
        header["selection"] = selection
    with atomic_write(path, force) as fh:
        size = write_export(fh, snapshot, header, selections, include_stacks, progress)
    return ExportResult(path, header["events"], header["source_events"], tuple(devices), size)


def exported_devices(snapshot: Snapshot, device: int | None) -> list[int]:
    if device is None:
        return list(range(len(snapshot.devices)))
    if not 0 <= device < len(snapshot.devices):
        raise UsageError(f"no device {device}; this snapshot has devices 0..{len(snapshot.devices) - 1}")
    return [device]


def make_header(snapshot: Snapshot, filter_text: str, device: int | None, devices: list[int], include_stacks: bool,
                selections: dict[int, np.ndarray], progress: ProgressFn | None = None) -> dict:
    # "format" must stay the first key: readers recognise an export by its first bytes.
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "source_name": snapshot.name,
        "source_size": int(snapshot.source_size),
        "source_sha256": file_sha256(snapshot.source_path, progress),
        "filter": filter_text,
        "device": device,
        "devices": list(devices),
        "include_stacks": include_stacks,
        "events": int(sum(len(s) for s in selections.values())),
        "source_events": int(sum(len(snapshot.devices[d].trace) for d in devices)),
        "source_events_per_device": {str(d): len(snapshot.devices[d].trace) for d in devices},
        # Where each device's clock starts in the source, so a reopened export shows the
        # source's relative times (its own first event is rarely the source's).
        "source_first_time_us": {str(d): first_time_us(snapshot.devices[d]) for d in devices},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "memtui_version": __version__,
    }


def first_time_us(dev) -> float | None:
    """The earliest finite event time of a device (the source's own origin when it came
    from an export), or None."""
    origin = dev.time_origin_us
    return origin if math.isfinite(origin) else None


def file_sha256(path: str, progress: ProgressFn | None = None) -> str | None:
    """Hex digest of the file as stored (compressed or not); None when it cannot be read."""
    if not path:
        return None
    digest = hashlib.sha256()
    try:
        total = os.path.getsize(path)
        done = 0
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress("hashing", done, total)
    except OSError:
        return None
    return digest.hexdigest()


def write_export(fh: BinaryIO, snapshot: Snapshot, header: dict, selections: dict[int, np.ndarray],
                 include_stacks: bool = True, progress: ProgressFn | None = None) -> int:
    """Write the whole export to ``fh``; returns the number of bytes written."""
    # A snapshot's strings may hold lone surrogates (pickle allows them; torch can write them):
    # they travel as the bytes Python's surrogatepass gives, and the reader takes them back the same.
    packer = msgpack.Packer(use_bin_type=True, unicode_errors="surrogatepass")
    written = 0

    def put(obj: dict) -> None:
        nonlocal written
        data = packer.pack(obj)
        fh.write(data)
        written += len(data)

    put(header)
    put({
        "kind": "snapshot",
        "allocator_settings": packable(snapshot.allocator_settings),
        "annotations": [{"device": a.device, "stage": a.stage, "name": a.name, "time_us": time_value(a.time_us)}
                        for a in snapshot.annotations],
    })
    tables = build_tables(snapshot, selections, include_stacks)
    put(tables.as_object(snapshot))
    for d in selections:
        put(device_object(snapshot, d, len(selections[d]), tables))
    total = int(header["events"])
    done = 0
    if progress is not None:
        progress("exporting", 0, total)
    for d, rows in selections.items():
        for start in range(0, len(rows), CHUNK_EVENTS):
            put(events_object(snapshot, d, rows[start:start + CHUNK_EVENTS], tables))
            done += min(CHUNK_EVENTS, len(rows) - start)
            if progress is not None:
                progress("exporting", done, total)
    put({"kind": "end", "events": total})
    return written


def device_object(snapshot: Snapshot, d: int, n_events: int, tables: ExportTables) -> dict:
    dev = snapshot.devices[d]
    segs, blocks = dev.segments, dev.blocks
    strings = snapshot.strings
    return {
        "kind": "device",
        "device": d,
        "events": n_events,
        "source_events": len(dev.trace),
        "trace_pools": [packable(pool) for pool in dev.trace.pools],
        "segments": {
            "address": ints(segs.address),
            "total_size": ints(segs.total_size),
            "allocated_size": ints(segs.allocated_size),
            "active_size": ints(segs.active_size),
            "requested_size": ints(segs.requested_size),
            "stream": ints(segs.stream),
            "segment_type": [strings[int(i)] for i in segs.segment_type],
            "pool": [packable(segs.pools[int(p)]) for p in segs.pool],
            "expandable": segs.expandable.tolist(),
            "stack": tables.stack_ids(segs.stack),
            "fwd": tables.stack_ids(segs.fwd),
        },
        "blocks": {
            "segment": blocks.segment.tolist(),
            "address": ints(blocks.address),
            "size": ints(blocks.size),
            "requested_size": ints(blocks.requested_size),
            "state": [blocks.state_names[int(s)] for s in blocks.state],
            "stack": tables.stack_ids(blocks.stack),
            "fwd": tables.stack_ids(blocks.fwd),
        },
    }


def events_object(snapshot: Snapshot, d: int, rows: np.ndarray, tables: ExportTables) -> dict:
    dev = snapshot.devices[d]
    trace = dev.trace
    version = event_versions(dev)[rows]
    return {
        "kind": "events",
        "device": d,
        "index": rows.tolist(),
        "action": trace.action[rows].tolist(),
        "addr": ints(trace.addr[rows]),
        "size": ints(trace.size[rows]),
        "stream": ints(trace.stream[rows]),
        "time_us": times(trace.time_us[rows]),
        "stack": tables.stack_ids(trace.stack[rows]),
        "ctx": tables.string_ids(trace.ctx[rows]),
        "meta": tables.string_ids(trace.meta[rows]),
        "device_free": ints(trace.device_free[rows]),
        "version": version.tolist(),
        "fwd": tables.stack_ids(trace.fwd[rows]),
        "pool": trace.pool[rows].tolist(),
    }


def event_versions(dev) -> np.ndarray:
    """The address_n version of every event: its block's or segment's life, an annotation's
    labelled allocation, -1 for none."""
    version = dev.lives.event_version.astype(np.int64)
    version = np.where(version != NONE, version, dev.segment_lives.event_version)
    notes = dev.annotations
    if len(notes):
        version[notes.event] = notes.version
    return version


def ints(column: np.ndarray) -> list:
    """Python ints; values msgpack cannot hold (past 64 bits) become decimal strings."""
    values = column.tolist()
    if column.dtype == object:
        values = [v if -(1 << 63) <= v <= _UINT64_MAX else str(v) for v in values]
    return values


def times(column: np.ndarray) -> list:
    """Microseconds as ints when they are whole (as torch writes them), floats otherwise, nil when unknown."""
    finite = np.isfinite(column)
    if finite.all() and np.array_equal(column, np.floor(column)) and (np.abs(column) < 2**62).all():
        return column.astype(np.int64).tolist()
    return [time_value(t) for t in column.tolist()]


def time_value(t: float) -> int | float | None:
    if not math.isfinite(t):
        return None
    return int(t) if t == int(t) and abs(t) < 2**62 else t


def packable(value: object) -> object:
    """``value`` with everything msgpack cannot write turned into something it can."""
    if isinstance(value, dict):
        return {packable_key(k): packable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [packable(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value <= _UINT64_MAX:
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    return str(value)


def packable_key(key: object) -> object:
    return key if isinstance(key, (str, int)) and not isinstance(key, bool) else str(key)
