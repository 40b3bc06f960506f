"""Make a large, realistic snapshot by tiling a real one: ``make_big.py --events N -o FILE``.

The largest device trace of the source snapshot (by default the 1M-event file in
``../shared/snapshots``) is repeated until it holds N events. Every repetition is moved
to its own address range and its own stretch of time, so allocations pair up, address_n
versions count per address and stacks stay the real ones. The segments are those of the
source moved to the last repetition's addresses, so the blocks alive at snapshot time link
to the last repetition's allocations. The output is deterministic.

The pickle is written the way ``torch.cuda.memory._dump_snapshot`` writes one: protocol 4,
64 KiB FRAMEs, every container memoized, frame dicts written once and referred to after,
the trace in batches of 1000 between MARK and APPENDS, a fresh ``'N/A'`` string in each
entry, and a free_completed sharing its free_requested's frame list. Entries are encoded
as they are written, so a 40M-event file needs no more memory than the source.
"""

from __future__ import annotations

import argparse
import os
import pickle
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memtui.load.read import read_snapshot  # noqa: E402

DEFAULT_SOURCE = ROOT.parent / "shared" / "snapshots" / "big_trace.pickle.xz"
ADDRESS_STRIDE = 1 << 40  # each repetition's addresses; real ones span far less
BATCH = 1000


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, with the memo counter exposed so entries written by hand
    (which memoize things the pickler never sees) keep the numbering exact."""

    next_index = 0

    def memoize(self, obj):
        if self.fast:
            return
        idx = self.next_index
        self.next_index += 1
        self.write(self.put(idx))
        self.memo[id(obj)] = idx, obj


def _get(index: int) -> bytes:
    return b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)


def _int(x: int) -> bytes:
    if x > 0x7FFFFFFF:  # addresses and times: LONG1, as pickle.encode_long spells a positive int
        raw = x.to_bytes((x.bit_length() >> 3) + 1, "little", signed=True)
        return b"\x8a" + bytes([len(raw)]) + raw
    if 0 <= x < 256:
        return b"K" + bytes([x])
    if 0 <= x < 65536:
        return b"M" + struct.pack("<H", x)
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return b"J" + struct.pack("<i", x)
    raw = pickle.encode_long(x)
    return b"\x8a" + bytes([len(raw)]) + raw


def _fresh_string(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return (b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))) + raw + b"\x94"


class _NotYetWritten(Exception):
    """An entry refers to something not written yet, so it cannot be written from a plan."""


class TraceWriter:
    """Encodes trace entries straight to pickle opcodes, sharing the pickler's memo."""

    def __init__(self, pickler: _Pickler) -> None:
        self.p = pickler
        self._refs: dict[int, bytes] = {}
        self._strings: dict[str, bytes] = {}
        self._plans: dict[int, tuple[int, list]] = {}
        self._list_cache: dict[int, bytes] = {}

    def ref(self, obj: object) -> bytes:
        """A BINGET of a shared object (key string, frame dict); written in full the first time."""
        found = self._refs.get(id(obj))
        if found is None:
            memo = self.p.memo.get(id(obj))
            if memo is None:
                self.p.save(obj)  # written and memoized here, left on the stack where it belongs
                return b""
            found = self._refs[id(obj)] = _get(memo[0])
        return found

    def shared_string(self, value: str) -> bytes:
        found = self._strings.get(value)
        if found is None:
            self._strings[value] = _get(self.p.next_index)
            self.p.next_index += 1
            return _fresh_string(value)
        return found

    def _memoize(self) -> int:
        idx = self.p.next_index
        self.p.next_index += 1
        self.p.write(b"\x94")
        return idx

    def entry(self, e: dict, addr_shift: int, time_shift: int, lists: dict[int, int]) -> None:
        plan = self._plans.get(id(e))
        if plan is None:
            try:
                plan = self._plans[id(e)] = self._plan(e)
            except _NotYetWritten:  # its first occurrence writes a shared object in full
                self._first_entry(e, addr_shift, time_shift, lists)
                return
        # Repeated entries are written from their plan: the bytes that never change, joined
        # once, and the few values that move with the repetition.
        memos, items = plan
        parts = []
        for item in items:
            if type(item) is bytes:
                parts.append(item)
                continue
            kind, value = item
            if kind == "addr":
                parts.append(_int(value + addr_shift))
            elif kind == "time":
                parts.append(_int(value + time_shift))
            else:
                idx = lists.get(id(value))
                if idx is None:
                    lists[id(value)] = self.p.next_index + memos
                    memos += 1
                    parts.append(self._list_bytes(value))
                else:
                    parts.append(_get(idx))
        self.p.write(b"".join(parts))
        self.p.next_index += memos
        self.p.framer.commit_frame()

    def _known(self, obj: object) -> bytes:
        found = self._refs.get(id(obj))
        if found is None:
            if id(obj) not in self.p.memo:
                raise _NotYetWritten
            found = self.ref(obj)
        return found

    def _plan(self, e: dict) -> tuple[int, list]:
        plan: list = [b"}\x94("]
        memos = 1
        for key, value in e.items():
            plan.append(self._known(key))
            kind = type(value)
            if kind is int and key in ("addr", "time_us"):
                plan.append(("addr" if key == "addr" else "time", value))
            elif kind is int:
                plan.append(_int(value))
            elif kind is str and key == "compile_context":
                plan.append(_fresh_string(value))
                memos += 1
            elif kind is str:
                if value not in self._strings:
                    raise _NotYetWritten
                plan.append(self._strings[value])
            elif kind is list and key == "frames":
                for frame in value:
                    self._known(frame)
                plan.append(("frames", value))
            else:
                raise _NotYetWritten  # rare values are written by the pickler itself
        plan.append(b"u")
        merged: list = []
        for item in plan:
            if type(item) is bytes and merged and type(merged[-1]) is bytes:
                merged[-1] += item
            else:
                merged.append(item)
        return memos, merged

    def _list_bytes(self, frames: list) -> bytes:
        found = self._list_cache.get(id(frames))
        if found is None:
            refs = [self.ref(f) for f in frames]
            if len(refs) > 1:
                found = b"]\x94(" + b"".join(refs) + b"e"
            else:
                found = b"]\x94" + b"".join(refs) + (b"a" if refs else b"")
            self._list_cache[id(frames)] = found
        return found

    def _first_entry(self, e: dict, addr_shift: int, time_shift: int, lists: dict[int, int]) -> None:
        write = self.p.write
        write(b"}")
        self._memoize()
        write(b"(")
        for key, value in e.items():
            write(self.ref(key))
            kind = type(value)
            if kind is int:
                write(_int(value + (addr_shift if key == "addr" else time_shift if key == "time_us" else 0)))
            elif kind is str:
                if key == "compile_context":  # torch writes a fresh string every time
                    write(_fresh_string(value))
                    self.p.next_index += 1
                else:
                    write(self.shared_string(value))
            elif kind is list and key == "frames":
                self._frames(value, lists)
            elif kind is float and key == "time_us":
                write(b"G" + struct.pack(">d", value + time_shift))
            else:
                self.p.save(value)
        write(b"u")
        self.p.framer.commit_frame()

    def _frames(self, frames: list, lists: dict[int, int]) -> None:
        write = self.p.write
        idx = lists.get(id(frames))
        if idx is not None:  # a free_completed shares its free_requested's list
            write(_get(idx))
            return
        write(b"]")
        lists[id(frames)] = self._memoize()
        if len(frames) > 1:
            write(b"(")
        for frame in frames:
            write(self.ref(frame))
        if frames:
            write(b"e" if len(frames) > 1 else b"a")


def _tiles(trace: list, events: int, span_us: int):
    """(entry, address shift, time shift, repetition) for ``events`` entries ending with ``trace``.

    The source trace comes last, whole (so the blocks alive at snapshot time are its
    allocations); before it, earlier repetitions without the dump's ``snapshot`` entry,
    the first one cut at the front, as a wrapped ring buffer would be.
    """
    if events <= len(trace):
        for e in trace[len(trace) - events:]:
            yield e, 0, 0, 0
        return
    keep = [e for e in trace if e.get("action") != "snapshot"]
    before = events - len(trace)
    repeats = -(-before // len(keep))
    skip = repeats * len(keep) - before
    for k in range(repeats):
        for e in keep[skip if k == 0 else 0:]:
            yield e, k * ADDRESS_STRIDE, k * span_us, k
    for e in trace:
        yield e, repeats * ADDRESS_STRIDE, repeats * span_us, repeats


def write_big(source: dict, events: int, out: Path) -> int:
    traces = source["device_traces"]
    main = max(range(len(traces)), key=lambda d: len(traces[d])) if traces else 0
    trace = traces[main] if traces else []
    if not trace:
        raise SystemExit("the source snapshot has no trace to tile")
    times = [e["time_us"] for e in trace if isinstance(e.get("time_us"), (int, float))]
    span_us = int(max(times) - min(times)) + 1 if times else 0
    keep = sum(1 for e in trace if e.get("action") != "snapshot")
    repeats = -(-max(0, events - len(trace)) // keep) if keep else 0
    last_shift = repeats * ADDRESS_STRIDE
    segments = [_shift_segment(s, last_shift) for s in source["segments"]]

    with open(out, "wb") as fh:
        p = _Pickler(fh, protocol=4)
        p.write(pickle.PROTO + bytes([4]))
        p.framer.start_framing()
        top: dict = {}
        p.write(b"}")
        p.memoize(top)
        p.write(b"(")
        writer = TraceWriter(p)
        p.save("segments")
        p.save(segments)
        p.save("device_traces")
        outer: list = []
        p.write(b"]")
        p.memoize(outer)
        p.write(b"(")
        written = 0
        for d, device_trace in enumerate(traces):
            p.write(b"]")
            p.memoize([])
            entries = _tiles(device_trace, events, span_us) if d == main else (
                (e, 0, 0, 0) for e in device_trace)
            written += _write_batches(writer, entries)
        p.write(b"e")
        for key in ("allocator_settings", "external_annotations"):
            if key in source:
                p.save(key)
                p.save(source[key])
        p.write(b"u" + pickle.STOP)
        p.framer.end_framing()
    return written


def _write_batches(writer: TraceWriter, entries) -> int:
    batch: list = []
    lists: dict[int, int] = {}
    tile = 0
    count = 0

    def flush() -> None:
        if len(batch) > 1:
            writer.p.write(b"(")
        for e, addr_shift, time_shift in batch:
            writer.entry(e, addr_shift, time_shift, lists)
        writer.p.write(b"e" if len(batch) > 1 else b"a")
        batch.clear()

    for e, addr_shift, time_shift, k in entries:
        if k != tile:
            lists.clear()  # frame lists are shared inside a repetition, never across
            tile = k
        batch.append((e, addr_shift, time_shift))
        count += 1
        if len(batch) == BATCH:
            flush()
    if batch:
        flush()
    return count


def _shift_segment(seg: dict, shift: int) -> dict:
    seg = dict(seg)
    seg["address"] = seg["address"] + shift
    seg["blocks"] = [dict(b, address=b["address"] + shift) for b in seg.get("blocks", [])]
    return seg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True, help="trace events in the largest device trace")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help=f"snapshot to tile (default: {DEFAULT_SOURCE})")
    args = parser.parse_args(argv)
    start = time.monotonic()
    source = read_snapshot(args.source)
    written = write_big(source, args.events, args.output)
    size = os.path.getsize(args.output)
    print(f"{args.output}: {written:,} events, {size / 1e6:,.1f} MB in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
