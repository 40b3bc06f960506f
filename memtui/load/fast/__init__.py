"""Fast path: one pass of compiled code over the pickle, the traces straight into columns.

The streaming decoder (memtui/load/stream) still has the C unpickler build a dict per
trace entry before the entry becomes columns. The scanner of ``memtui._native`` (built
from src/memtui_native/ where a C compiler exists) reads the opcodes itself: outside the
device traces it builds the objects like the unpickler does, inside them it writes each
entry's fields into columns and interns frames and stacks by content. Anything it does
not recognise (an old layout, a field it does not read, a value that is not plain, an
opcode that names code) raises :class:`FastFallback`, and the caller reads the file with
the streaming decoder, which builds the same model or gives the same error.

The file is read in chunks, decompressed as it goes; memory is the columns, the memo
(four bytes a slot) and the tables, not the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from memtui.compiled import native as _native  # None without a C compiler: the streaming decoder reads
from memtui.load import ahead
from memtui.load.ahead import scan_threads
from memtui.load.changes import check_unchanged, file_state
from memtui.load.limits import MAX_COMPRESSED_ITEM, GuardedStream, InflationRefused
from memtui.load.progress_relay import ProgressRelay
from memtui.load.source import ProgressFn, SourceInfo, inspect_source, open_unguarded

__all__ = ["FastFallback", "Scanned", "ScannedTrace", "available", "scan_snapshot"]

# Tests and users can turn the fast path off (MEMTUI_NO_NATIVE=1 at run time does too).
enabled = not os.environ.get("MEMTUI_NO_NATIVE")

CHUNK = 16 << 20
_WIDTHS = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
INT_COLUMNS = ("action", "addr", "size", "stream", "stack", "ctx", "meta", "device_free")


def available() -> bool:
    """Whether the compiled scanner is there and turned on."""
    return _native is not None and enabled


class FastFallback(Exception):
    """The scanner does not handle this file. ``refused``: it names code, which the plain
    loader refuses by name (so there is no point in trying the streaming decoder)."""

    def __init__(self, reason: str, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused


@dataclass
class ScannedTrace:
    """One device trace: integer columns as narrow as their values allow (``action``, ``ctx``
    and ``meta`` are local ids, ``stack`` the scanner's stack ids), and the distinct
    compile contexts and user metadata (str or None) in the order first seen."""

    rows: int
    columns: dict[str, np.ndarray]
    ctx_values: list
    meta_values: list


@dataclass
class Scanned:
    """What the scanner read: the snapshot dict with empty device traces, the traces, the
    action names (by local id), the frames by content ``(filename, line, name, extras)``
    and the stacks as runs of frame ids (``stack_flat[stack_offsets[s]:stack_offsets[s + 1]]``),
    all numbered in the order first seen."""

    raw: dict
    traces: list[ScannedTrace]
    actions: list[str]
    frames: list[tuple]
    stack_flat: np.ndarray
    stack_offsets: np.ndarray
    parallel: dict  # ranges read by workers: planned, merged, read in order instead
    # The external annotations read into columns (``device``, ``time_us`` arrays, ``stage``,
    # ``name`` lists of str), where ``raw`` holds none of them; None where it holds them.
    annotations: dict | None
    # The scan's thread's pairing (memtui/load/ahead.py), made while the model is built from
    # the columns; None when nothing is paired there.
    paired: ahead.Pairing | None = None


def scan_snapshot(path: str | os.PathLike, progress: ProgressFn | None = None) -> Scanned:
    """Read ``path`` with the compiled scanner. Raises FastFallback when it cannot."""
    if not available():
        raise FastFallback("the compiled scanner is not available")
    info = inspect_source(path)
    before = file_state(info.path)
    relay = ProgressRelay(progress) if progress is not None else None
    # A scan of this very file the command line started before the imports (ahead.py), else one here.
    if info.compression is None:
        result = ahead.take(info.path, before, relay)
    else:
        ahead.discard()  # it scans only uncompressed files: one it started was another file's
        result = None
    if result is None:
        result = _scan_here(info, relay)
    check_unchanged(info.path, before, os.path.basename(info.path))
    return _scanned(result)


def _scan_here(info: SourceInfo, relay: ProgressRelay | None) -> dict:
    scanner = _native.Scanner()
    try:
        total = _feed_all(scanner, info, relay)
        result = scanner.finish(total)
        result["parallel"] = scanner.parallel
    except _native.Unsupported as exc:
        reason, offset, refused = exc.args
        raise FastFallback(f"{reason} (at byte {offset:,})", refused) from None
    except MemoryError:
        raise FastFallback("not enough memory") from None
    finally:
        del scanner
    return result


def _feed_all(scanner, info, relay) -> int:
    """Feed the decompressed file to ``scanner`` until STOP; the stream's length, as far
    as the scanner needs to know it. An uncompressed file is read by offset, in parallel
    where it is large enough (parallel.c)."""
    if info.compression is None:
        try:
            with open(info.path, "rb", buffering=0) as fh:
                scanner.scan_file(fh.fileno(), info.size, scan_threads(), relay)
        except OSError as exc:
            raise FastFallback(f"cannot read ({exc})") from None
        return info.size
    try:
        stream = open_unguarded(info, relay)
        if info.compression is not None:  # inflation is bounded as for the other readers
            stream = GuardedStream(stream, info)
    except OSError as exc:
        raise FastFallback(f"cannot open ({exc})") from None
    buf = bytearray(CHUNK)
    filled = 0
    eof = False
    with stream:
        try:
            while True:
                if filled == len(buf):  # one object larger than the buffer
                    if len(buf) > MAX_COMPRESSED_ITEM:
                        raise FastFallback("an object larger than any snapshot holds")
                    buf.extend(bytes(len(buf)))
                with memoryview(buf) as view:
                    if not eof:
                        got = stream.readinto(view[filled:])
                        eof = not got
                        filled += got or 0
                    consumed = scanner.feed(view[:filled], eof)
                if scanner.done:
                    end = scanner.offset
                    if scanner.max_frame_end <= end:
                        return end
                    # A frame claims bytes past STOP: the unpickler reads them, so they must be there.
                    rest = filled - consumed
                    while rest + end < scanner.max_frame_end:
                        more = stream.read(CHUNK)
                        if not more:
                            break
                        rest += len(more)
                    return end + rest
                if eof:
                    raise FastFallback("the pickle ends before STOP")
                buf[:filled - consumed] = buf[consumed:filled]
                filled -= consumed
        except (FastFallback, _native.Unsupported, MemoryError, InflationRefused):
            raise
        except Exception as exc:  # corrupt compressed data, a read error: the reference path reports it
            if relay is not None and relay.error is not None:
                raise relay.error from None  # the caller's progress callback stopped the load
            raise FastFallback(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _check_detached(root: dict) -> None:
    """Refuse (fall back) when anything but the root's own ``device_traces`` reaches the
    list of traces or a trace: such a reference would show the scanner's placeholders
    where the reference decoder shows the traces (a memo reference to the root dict, say,
    from inside a segment). Compiled (src/memtui_native/reach.c): a file can nest values
    arbitrarily deep, and the walk visits every annotation of every open."""
    reached = _native.traces_reached(root, root.get("device_traces"))
    if reached == 1:
        raise FastFallback("a device trace is referred to outside the list of traces")
    if reached == 2:
        raise FastFallback("the list of device traces is referred to outside the root")


def _scanned(result: dict) -> Scanned:
    _check_detached(result["root"])
    traces = []
    for t in result["traces"]:
        columns = {name: np.frombuffer(t[name][0], _WIDTHS[t[name][1]]) for name in INT_COLUMNS}
        columns["time_us"] = np.frombuffer(t["time_us"], np.float64)
        traces.append(ScannedTrace(t["rows"], columns, t["ctx_values"], t["meta_values"]))
    raw = dict(result["root"])
    raw["device_traces"] = [[] for _ in traces]
    annotations = result.get("annotations")  # (None: the root holds them, as dicts)
    if annotations is not None:
        annotations = {**annotations, "device": np.frombuffer(annotations["device"], np.int64),
                       "time_us": np.frombuffer(annotations["time_us"], np.float64)}
    return Scanned(raw=raw, traces=traces, actions=result["actions"], frames=result["frames"],
                   stack_flat=np.frombuffer(result["stack_flat"], np.int32),
                   stack_offsets=np.frombuffer(result["stack_offsets"], np.int64), parallel=result["parallel"],
                   annotations=annotations, paired=result.get("paired"))
