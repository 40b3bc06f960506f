"""events: trace rows, as the explorer's event log shows them, optionally only those a filter matches."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.model import Snapshot, metadata
from memtui.model.segments import pool_name
from memtui.query import compile_filter
from memtui.report.sections import Lines, Report
from memtui.services.common import device_option
from memtui.services.options import OptionError, option
from memtui.units import format_bytes, format_seconds


def _check_filter(text: str) -> None:
    compile_filter(text)  # a bad filter fails with its one line before the file is read


@dataclass(frozen=True)
class EventsOptions:
    device: int | None = device_option()
    filter: str = option("", "only the events matching this filter (docs/filter.md), terms ANDed: 'size>1MiB', "
                             "'action:alloc,oom', 'file:train.py', 'func:forward', 'id:7f064c000000_3', 'leaked'; "
                             "'or', 'not' and parentheses combine; a bare word searches the stacks. Empty: every "
                             "event", kind="str", check=_check_filter)
    start: int = option(0, "the first event, by its number in the index column (negative: counts from the end); "
                           "where a page ends, its last line (the agents' tool: next_start) says where the next "
                           "one starts")
    # The MCP tool bounds a page to 1..1000 rows, its own limit.
    limit: int = option(50, "how many events (0 for all)", low=0, front_ends=("cli",))


@dataclass
class EventsResult:
    snapshot: Snapshot
    device: int
    filter: str
    events_in_trace: int
    matching: int  # events the filter matches (all of them without one)
    filtered: bool
    start: int  # the trace index asked for, from the front
    skipped: int  # matching events before ``start``
    chosen: np.ndarray  # the trace indices of the rows
    next_start: int | None  # where the next page starts; None: nothing more

    @property
    def truncated(self) -> bool:
        return self.next_start is not None

    def rows(self) -> Iterator[dict[str, Any]]:
        t0 = self.snapshot.devices[self.device].time_origin_us
        return (event_row(self.snapshot, self.device, int(i), t0) for i in self.chosen)

    def to_json(self) -> list[dict[str, Any]]:
        return list(self.rows())

    def lines(self) -> Iterator[str]:
        """The text, a line at a time (a whole trace is millions of lines)."""
        note = overflow_note(self.snapshot)
        if note and self.start == 0:
            yield f"({note})"
        yield f"{'index':>9} {'time':>13} {'action':<15} {'address_n':<20} {'size':>11} {'stream':>10}  frame"
        for row in self.rows():
            yield (f"{row['index']:>9} {format_seconds(row['time_s']):>13} {row['action']:<15} "
                   f"{row['address_n']:<20} {format_bytes(row['size']):>11} {row['stream']:>10}  {row['top_frame']}")
        if self.next_start is not None:
            yield f"(more: --start {self.next_start})"

    def report(self) -> Report:
        return Report("Events", [Lines("rows", lines=list(self.lines()))])


def events(snapshot: Snapshot, options: EventsOptions) -> EventsResult:
    compiled = compile_filter(options.filter)
    device = snapshot.device_or_default(options.device)
    dev = snapshot.devices[device]
    n = len(dev.trace)
    # A start is an event's number as the index column gives it: the source's, in an export
    # (its rows are a part of the source's events); a negative one counts rows from the end.
    last = dev.shown_index(n - 1) if n else -1
    if options.start < 0:
        first = max(0, options.start + n)
    elif not options.start <= last + 1:
        raise OptionError("start", f"{options.start} is outside the trace (0..{last})")
    elif dev.source_index is not None:
        first = int(np.searchsorted(dev.source_index, options.start))  # the first event at or after it
    else:
        first = options.start
    matching = None if compiled.matches_everything else compiled.indices(snapshot, device)
    if matching is None:
        before, candidates = first, np.arange(first, n)
    else:
        before = int(np.searchsorted(matching, first))
        candidates = matching[before:]
    chosen = candidates if options.limit == 0 else candidates[:options.limit]
    more = len(candidates) > len(chosen)
    return EventsResult(snapshot, device, options.filter, n, n if matching is None else len(matching),
                        matching is not None, first, before if matching is not None else 0, chosen,
                        dev.shown_index(int(candidates[len(chosen)])) if more else None)


def event_row(snapshot: Snapshot, device: int, i: int, t0: float) -> dict[str, Any]:
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
