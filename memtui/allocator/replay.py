"""Replay a request stream through the simulated allocator.

The request stream is what the program asked of the allocator, taken from a recording
(memtui/analysis/whatif_requests.py builds it): allocations with their size, stream and
pool, frees (with or without uses on other streams still pending), the completion of those
uses, ``empty_cache`` calls and the request the recording ran out of memory on. The same
stream is replayed under any settings and memory limit.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace

import numpy as np

from memtui.allocator.addresses import AddressSpace
from memtui.allocator.blocks import Block, ExpandableSegment
from memtui.allocator.settings import K_LARGE_BUFFER, AllocatorSettings
from memtui.allocator.simulator import K_SMALL_BUFFER, MAX_DEVICE_BYTES, Simulator

# Request kinds.
ALLOC, FREE, FREE_PENDING, COMPLETE, EMPTY_CACHE, OOM_REQUEST = range(6)
NO_HINT = -1


@dataclass
class InitialSegment:
    """A segment that was there before the trace's first event (the recording started mid-run)."""

    addr: int
    size: int
    stream: int
    pool: int  # index into Requests.pools, -1 for the default pool
    small: bool
    expandable: bool
    # (address, size, slot, pending) of the live blocks, by address; pending: freed with uses on
    # other streams not yet complete (its free_completed is in the trace)
    blocks: list[tuple[int, int, int, bool]]


def consistent_initial(segments: list[InitialSegment]) -> list[InitialSegment]:
    """The segments and live blocks a state at the first event can really hold.

    That state is reconstructed from the trace, and a trace can contradict itself: two frees
    of one address with no alloc between them leave two blocks live there at once, blocks
    past their segment's end, segments (inferred from such blocks, or freed twice) that
    overlap. The allocator keeps disjoint segments of disjoint blocks, and both replays
    rely on it: two free blocks of one (stream, size, address) are one key of a pool, and
    the second one freed was lost from it (the compiled loop reported it as running out of
    memory). So: segments by address, each larger one first where two start together; one
    that overlaps a segment kept before it, is empty or would take the reserved bytes past
    what any device holds is left out, and so is a block that is empty, not wholly inside
    a kept segment or overlapping a block kept before it (in the state's order). Requests
    naming a block left out find none and change nothing, in both replays. A consistent
    state comes back as it was.
    """
    kept: list[InitialSegment] = []
    reserved = 0
    for seg in sorted(segments, key=lambda s: (s.addr, -s.size)):
        if seg.size <= 0 or reserved + seg.size > MAX_DEVICE_BYTES or (
                kept and seg.addr < kept[-1].addr + kept[-1].size):
            continue
        kept.append(replace(seg, blocks=[]))
        reserved += seg.size
    starts = [seg.addr for seg in kept]
    # Blocks of one address keep the state's order (a stable sort): the first one stays.
    for block in sorted((b for seg in sorted(segments, key=lambda s: s.addr) for b in seg.blocks),
                        key=lambda b: b[0]):
        addr, size = block[0], block[1]
        i = bisect_right(starts, addr) - 1
        if size <= 0 or i < 0:
            continue
        home = kept[i]
        if addr + size > home.addr + home.size:
            continue
        if home.blocks and addr < home.blocks[-1][0] + home.blocks[-1][1]:
            continue
        home.blocks.append(block)
    return kept


@dataclass
class Requests:
    """One device's request stream, as parallel columns (one row per request)."""

    kind: np.ndarray
    slot: np.ndarray  # which allocation (a life of the trace); the frees name the same slot
    size: np.ndarray  # bytes the program asked for
    stream: np.ndarray
    pool: np.ndarray  # index into ``pools`` (a private pool), -1 for the default pool
    event: np.ndarray  # the trace event the request comes from
    hint: np.ndarray  # where the recording's device refused: the limit for this request, or NO_HINT
    pools: list[tuple] = field(default_factory=list)
    freeable: dict[int, tuple] = field(default_factory=dict)  # empty_cache row -> private pools it freed
    initial: list[InitialSegment] = field(default_factory=list)
    recorded_segments: list[tuple[int, int]] = field(default_factory=list)  # segment_alloc (address, size)
    lowest_address: int = 0
    n_events: int = 0
    # The recording ran out under a per-process cap (an oom entry whose device_free exceeds
    # the request): its refusals are a cap's, checked against whole segments.
    process_cap: bool = False
    # Requests the recording served only after releasing its cache, as (the release's first
    # event, the request's alloc event): the first try was refused.
    retried: list[tuple[int, int]] = field(default_factory=list)

    @property
    def initial_reserved(self) -> int:
        """Bytes the segments there at the trace's first event reserve (a trace that starts mid-run)."""
        return sum(segment.size for segment in self.initial)

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def first_oom_event(self) -> int | None:
        rows = (self.kind == OOM_REQUEST).nonzero()[0]
        return int(self.event[rows[0]]) if len(rows) else None


@dataclass
class Outcome:
    """What one replay did."""

    events: list[tuple[int, int, int, int]]  # segment events: (action code, address, size, trace event)
    reserved_peak: int = 0
    peak_event: int = -1
    active_at_peak: int = 0
    allocated_at_peak: int = 0
    oom_event: int | None = None  # the first request this setting could not serve
    oom_size: int = 0
    recorded_ooms: list[tuple[int, bool]] = field(default_factory=list)  # (event, served)
    stopped_at: int | None = None  # a request the recording served failed here: the rest is another program
    retries: int = 0
    series_event: np.ndarray | None = None
    series_reserved: np.ndarray | None = None
    series_allocated: np.ndarray | None = None
    simulator: Simulator | None = None
    # The compiled loop's blocks where it stopped (``dump_state``), one row per block index:
    # index, live, address, size, stream, allocated | pending << 1, mapped, expandable, slot, prev.
    block_table: np.ndarray | None = None


def replay(requests: Requests, settings: AllocatorSettings, *, limit: int | None = None, per_process: bool = False,
           use_hints: bool = False, until_event: int | None = None, series: bool = False,
           keep_state: bool = False, device_total: int | None = None, hints_per_process: bool = False,
           native: bool | None = None, dump_state: bool = False) -> Outcome:
    """Run the requests through the allocator under ``settings``.

    ``limit``: bytes the process may reserve (None: no limit); ``per_process``: the limit is a
    ``set_per_process_memory_fraction`` cap. ``use_hints``: the device refuses exactly where
    the recording's did (the fidelity check). The replay stops at the first request the
    recording served and this allocator cannot: the program would have raised there.
    ``until_event``: stop after the requests of that trace event (to show the state there).
    ``native``: run the compiled loop when memtui has it (None: when available); the
    Python loop is the reference and the only one that can ``keep_state``; the compiled one
    returns its blocks as a table instead (``dump_state``).
    """
    from memtui.allocator import native_replay

    if native is not False and not keep_state:
        va_size = Simulator(settings, AddressSpace([], 0), device_total=device_total).va_size
        if native_replay.can_replay(requests, settings, va_size):
            return native_replay.replay_native(
                requests, settings, limit=limit, per_process=per_process, use_hints=use_hints,
                until_event=until_event, series=series, va_size=va_size, hints_per_process=hints_per_process,
                outcome_type=Outcome, dump_state=dump_state)
    stepper = Stepper(requests, settings, limit=limit, per_process=per_process, use_hints=use_hints, series=series,
                      device_total=device_total, hints_per_process=hints_per_process)
    stepper.run(until_event)
    return stepper.outcome(keep_state)


class Stepper:
    """The Python replay, resumable: :meth:`run` goes on to a later event (the explorer steps
    through a simulated run with it); :attr:`sim` and :attr:`slots` are the state there."""

    def __init__(self, requests: Requests, settings: AllocatorSettings, *, limit: int | None = None,
                 per_process: bool = False, use_hints: bool = False, series: bool = False,
                 device_total: int | None = None, hints_per_process: bool = False) -> None:
        self.requests = requests
        addresses = AddressSpace(requests.recorded_segments, requests.lowest_address)
        self.sim = sim = Simulator(settings, addresses, limit=limit, per_process=per_process,
                                   device_total=device_total, hints_per_process=hints_per_process)
        self.pools = [None] + list(requests.pools)  # pool index -1 -> None (default)
        self.slots: dict[int, Block] = {}
        _initial_state(sim, requests, self.pools, self.slots)
        self.out = out = Outcome(events=[])
        self.kinds, self.slot_col = requests.kind.tolist(), requests.slot.tolist()
        self.size_col = requests.size.tolist()
        self.stream_col, self.pool_col = requests.stream.tolist(), requests.pool.tolist()
        self.event_col = requests.event.tolist()
        self.hint_col = requests.hint.tolist() if use_hints else None
        n = len(self.kinds)
        self.series = series
        if series:
            self.s_reserved, self.s_allocated = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.emitted = 0
        self.k = 0  # the next request
        self.finished = False  # a request the recording served failed: the rest is another program
        out.reserved_peak, out.active_at_peak, out.allocated_at_peak = sim.reserved, sim.active, sim.allocated

    @property
    def last_event(self) -> int:
        """The trace event of the last request applied (-1: none yet)."""
        return self.event_col[self.k - 1] if self.k else -1

    def run(self, until_event: int | None = None) -> None:
        """Apply the requests up to and including those of trace event ``until_event`` (None: all)."""
        sim, out, slots, events = self.sim, self.out, self.slots, self.sim.events
        kinds, slot_col, size_col, stream_col = self.kinds, self.slot_col, self.size_col, self.stream_col
        pool_col, event_col, hint_col, pools = self.pool_col, self.event_col, self.hint_col, self.pools
        n = len(kinds)
        k = self.k
        while k < n and not self.finished:
            kind = kinds[k]
            event = event_col[k]
            if until_event is not None and event > until_event:
                break
            if kind == ALLOC or kind == OOM_REQUEST:
                hint = hint_col[k] if hint_col is not None else NO_HINT
                # A negative hint is no byte count (NO_HINT, or the recorded reserved curve of
                # a trace that frees segments it never had): none, as in the compiled loop.
                block = sim.malloc(size_col[k], stream_col[k], pools[pool_col[k] + 1],
                                   hint if hint >= 0 else None)
                if kind == OOM_REQUEST:
                    out.recorded_ooms.append((event, block is not None))
                    if block is None and out.oom_event is None:
                        out.oom_event, out.oom_size = event, size_col[k]
                    elif block is not None:
                        # Served where the recording failed: what came next is unknown; the recording
                        # went on without this block, and so does the replay.
                        _note_peak(sim, out, event)
                        sim.free(block)
                elif block is None:
                    if out.oom_event is None:
                        out.oom_event, out.oom_size = event, size_col[k]
                    out.stopped_at = event
                    self.finished = True
                else:
                    block.slot = slot_col[k]
                    slots[slot_col[k]] = block
                    if sim.reserved > out.reserved_peak:
                        _note_peak(sim, out, event)
            elif kind == FREE or kind == FREE_PENDING:
                # Only while the block is still this allocation's: a trace that frees a life twice,
                # or after empty_cache completed its pending free, names a block the allocator
                # has merged, released or handed to another allocation since (which one that is
                # differs between this loop's objects and the compiled loop's reused indices).
                block = slots.get(slot_col[k])
                if block is not None and block.allocated and block.slot == slot_col[k]:
                    sim.free(block, kind == FREE_PENDING)
                    if kind == FREE:
                        del slots[slot_col[k]]
            elif kind == COMPLETE:
                block = slots.pop(slot_col[k], None)
                if block is not None and block.slot == slot_col[k]:
                    sim.complete(block)
            elif kind == EMPTY_CACHE:
                sim.empty_cache(tuple(pools[p + 1] for p in self.requests.freeable.get(k, ())))
            if len(events) != self.emitted:
                self.emitted = _flush(events, self.emitted, out, event)
            if self.series:
                self.s_reserved[k], self.s_allocated[k] = sim.reserved, sim.allocated
            k += 1
        self.k = k

    def outcome(self, keep_state: bool = False) -> Outcome:
        out = self.out
        out.retries = self.sim.retries
        if self.series:
            done = self.k
            out.series_event = self.requests.event[:done]
            out.series_reserved, out.series_allocated = self.s_reserved[:done], self.s_allocated[:done]
        if keep_state:
            out.simulator = self.sim
        return out


def _note_peak(sim: Simulator, out: Outcome, event: int) -> None:
    if sim.reserved > out.reserved_peak:
        out.reserved_peak, out.peak_event = sim.reserved, event
        out.active_at_peak, out.allocated_at_peak = sim.active, sim.allocated


def _flush(events: list, emitted: int, out: Outcome, event: int) -> int:
    for code, addr, size in events[emitted:]:
        out.events.append((code, addr, size, event))
    return len(events)


def _initial_state(sim: Simulator, requests: Requests, pools: list, slots: dict[int, Block]) -> None:
    """The segments and live blocks that were there at the trace's first event (by address,
    as :func:`consistent_initial` leaves them)."""
    initial = requests.initial
    for k, seg in enumerate(initial):
        pool = sim.pool(seg.small, pools[seg.pool + 1])
        segment = None
        tail_size = 0
        if seg.expandable:
            page = K_SMALL_BUFFER if seg.small else K_LARGE_BUFFER
            pages = max(-(-sim.va_size // page), -(-seg.size // page) + 1)
            if k + 1 < len(initial):
                # Its reserved range ends before the next segment: torch reserved each range
                # apart, and one running into the next would map blocks over that one's.
                pages = min(pages, max(initial[k + 1].addr - seg.addr, 0) // page)
            tail_size = pages * page - seg.size  # the unmapped rest of the range, if any
            segment = ExpandableSegment(seg.addr, page, max(pages, -(-seg.size // page)))
            segment.mapped.update(range(seg.size // page))
        chain: list[Block] = []
        cursor = seg.addr
        for addr, size, slot, pending in seg.blocks:
            if addr > cursor:
                chain.append(Block(cursor, addr - cursor, seg.stream, pool, segment))
            block = Block(addr, size, seg.stream, pool, segment)
            block.allocated = not pending
            block.pending = pending
            if pending:
                sim.pending[id(block)] = block
            block.slot = slot
            slots[slot] = block
            chain.append(block)
            cursor = addr + size
        end = seg.addr + seg.size
        if cursor < end:
            chain.append(Block(cursor, end - cursor, seg.stream, pool, segment))
        if tail_size > 0:
            tail = Block(end, tail_size, seg.stream, pool, segment)
            tail.mapped = False
            chain.append(tail)
        for before, after in zip(chain, chain[1:]):
            before.next, after.prev = after, before
        for block in chain:
            if not block.mapped:
                pool.insert_unmapped(block)
            elif not block.allocated and not block.pending:
                pool.insert(block)
            else:
                sim.allocated += block.size if block.allocated else 0
                sim.active += block.size
        sim.reserved += seg.size
        sim.addresses.add_live(seg.addr, segment.size if segment is not None else seg.size)
        if segment is None:
            sim.segments[seg.addr] = chain[0]
        else:
            sim.expandable.append((segment, pool, seg.stream))
