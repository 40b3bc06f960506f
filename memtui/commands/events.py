"""memtui events: trace rows, as the explorer's event log shows them."""

from __future__ import annotations

import math

from memtui.commands._common import (
    DEFAULT_DEVICE,
    add_json_flag,
    add_snapshot_argument,
    device_or_error,
    load,
    print_json,
)
from memtui.errors import UsageError
from memtui.model import Snapshot, metadata
from memtui.model.segments import pool_name
from memtui.units import format_bytes, format_seconds

NAME = "events"
HELP = "Print trace events: index, time, action, address_n, size, stream, top frame."


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--device", type=int, default=None, help=f"device (default: {DEFAULT_DEVICE})")
    parser.add_argument("--start", type=int, default=0, help="first event index (negative counts from the end)")
    parser.add_argument("--limit", type=int, default=50, help="how many events (0 for all)")
    add_json_flag(parser)


def event_row(snapshot: Snapshot, device: int, i: int, t0: float) -> dict:
    """One event as ``events --json`` prints it: the log's columns, then what the entry
    carries besides (compile context, user metadata as recorded, and for a backward
    allocation with ``forward_frames`` the forward line it ran for)."""
    dev = snapshot.devices[device]
    trace = dev.trace
    t = float(trace.time_us[i])
    strings = snapshot.strings
    meta = int(trace.meta[i])
    fwd = int(trace.fwd[i])
    return {
        "index": dev.shown_index(i),
        "time_us": t if math.isfinite(t) else None,
        "time_s": (t - t0) / 1e6 if math.isfinite(t) and math.isfinite(t0) else None,
        "action": snapshot.actions.name(int(trace.action[i])),
        "address_n": dev.event_address_n(i),
        "addr": int(trace.addr[i]),
        "size": int(trace.size[i]),
        "stream": int(trace.stream[i]),
        "top_frame": snapshot.event_top_frame(device, i),
        "compile_context": strings.raw(int(trace.ctx[i])),
        "user_metadata": metadata.fields(strings.raw(meta)) if meta in strings.dict_ids else strings.raw(meta),
        "metadata": metadata.fields(strings.raw(meta)),
        "forward_top_frame": snapshot.stacks.top_frame_text(fwd) if fwd >= 0 else None,
        "pool": pool_name(pool) if (pool := dev.event_pool(i)) is not None else None,
    }


def overflow_note(snapshot: Snapshot) -> str | None:
    """What to say where a trace starts, when torch says its ring buffer overflowed."""
    if not snapshot.trace_overflowed:
        return None
    size = snapshot.trace_max_entries
    ring = f"its {size:,}-entry ring buffer" if size else "its ring buffer"
    return f"the trace starts mid-run: {ring} overflowed (trace_alloc_overflowed), older events were dropped"


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    device = device_or_error(snapshot, args.device)
    trace = snapshot.devices[device].trace
    n = len(trace)
    start = max(0, args.start + n) if args.start < 0 else args.start
    if not 0 <= start <= n:
        raise UsageError(f"--start {args.start} is outside the trace (0..{n - 1})")
    if args.limit < 0:
        raise UsageError("--limit must be 0 (all) or positive")
    stop = n if args.limit == 0 else min(n, start + args.limit)
    t0 = snapshot.devices[device].time_origin_us
    rows = (event_row(snapshot, device, i, t0) for i in range(start, stop))
    if args.json:
        print_json(list(rows))
        return 0
    note = overflow_note(snapshot)
    if note and start == 0:
        print(f"({note})")
    print(f"{'index':>9} {'time':>13} {'action':<15} {'address_n':<20} {'size':>11} {'stream':>10}  frame")
    for row in rows:
        print(f"{row['index']:>9} {format_seconds(row['time_s']):>13} {row['action']:<15} {row['address_n']:<20} "
              f"{format_bytes(row['size']):>11} {row['stream']:>10}  {row['top_frame']}")
    return 0
