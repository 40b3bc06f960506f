"""The allocator's state at any trace event ("time travel").

The state after event ``i`` is the set of allocations and segments whose lives span
``i``. Lives come from the model (alloc → free_requested → free_completed, and
segment_alloc/map → segment_free/unmap). Memory that was already there when the trace
starts (the ring buffer dropped its alloc, or recording began later) and is still there
at snapshot time comes from the snapshot's own segment and block lists and spans the
whole trace.

Queries never replay from the start: an :class:`IntervalIndex` keeps, every ``K``
events, the lives open at that point (a checkpoint), so a query looks at one checkpoint
plus at most ``K`` lives started after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

from memtui.model import DeviceModel, column_passes
from memtui.model import actions as act
from memtui.model.columns import INT64_MAX
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE

# Aim for checkpoints every K events, but keep the checkpoint lists under this many ids.
DEFAULT_STRIDE = 1024
# Before the indexes are built, a state this many events or fewer from the last one asked
# for is found from it (the lives those events touch) instead of a pass over every life.
NEAR_EVENTS = 4096
MAX_CHECKPOINT_IDS = 16_000_000
# The caching allocator rounds every block up to a multiple of this (a power of two:
# rounded_block_sizes relies on it).
MIN_BLOCK_SIZE = 512


class IntervalIndex:
    """Which of a set of [start, end) intervals contain a point, in O(open + K) per query."""

    def __init__(self, start: np.ndarray, end: np.ndarray, n_points: int, stride: int = DEFAULT_STRIDE) -> None:
        self.start = start.astype(np.int64)
        self.end = end.astype(np.int64)
        self.by_start = np.argsort(self.start, kind="stable")
        self.sorted_start = self.start[self.by_start]
        stride = max(1, stride)
        # Wider strides when intervals are long-lived (a leak), to bound checkpoint memory.
        while True:
            first = np.maximum(self.start, 0) // stride + (np.maximum(self.start, 0) % stride != 0)
            first = np.where(self.start < 0, 0, first)
            last = (np.maximum(self.end, 1) - 1) // stride
            span = np.maximum(last - first + 1, 0)
            span[self.end <= np.maximum(self.start, 0)] = 0
            if int(span.sum()) <= MAX_CHECKPOINT_IDS or stride >= max(n_points, 1):
                break
            stride *= 4
        self.stride = stride
        ids = np.repeat(np.arange(len(self.start), dtype=np.int64), span)
        offsets_in_span = np.arange(len(ids), dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
        cps = np.repeat(first, span) + offsets_in_span
        order = np.argsort(cps, kind="stable")
        self.checkpoint_ids = ids[order].astype(np.int32)
        n_cp = n_points // stride + 2
        self.checkpoint_offsets = np.zeros(n_cp + 1, np.int64)
        np.cumsum(np.bincount(cps, minlength=n_cp)[:n_cp], out=self.checkpoint_offsets[1:])

    # What is kept of a built index (memtui/cache/index_store.py): everything but the
    # intervals themselves, which the replayer has.
    KEPT = ("by_start", "sorted_start", "checkpoint_ids", "checkpoint_offsets")

    def kept_arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.KEPT}

    @classmethod
    def from_kept(cls, start: np.ndarray, end: np.ndarray, n_points: int, stride: int,
                  arrays: dict[str, np.ndarray]) -> IntervalIndex:
        """The index of these intervals from what :meth:`kept_arrays` gave; ValueError when
        the arrays cannot be the index of these intervals (lengths, ranges, order)."""
        index = cls.__new__(cls)
        # The replayer's own intervals, as they are: a query only compares them with a point,
        # and two int64 copies of a 10M-event trace's lives took longer than the rest of this.
        index.start, index.end = start, end
        index.stride = int(stride)
        by_start, sorted_start = arrays["by_start"], arrays["sorted_start"]
        ids, offsets = arrays["checkpoint_ids"], arrays["checkpoint_offsets"]
        n = len(index.start)
        if index.stride < 1 or len(by_start) != n or len(sorted_start) != n \
                or len(offsets) != n_points // index.stride + 3:
            raise ValueError("an index of other intervals")
        if n and (int(by_start.min()) < 0 or int(by_start.max()) >= n
                  or not np.array_equal(index.start[by_start], sorted_start)):
            raise ValueError("an index whose order is not of these intervals")
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError("checkpoints naming intervals that are not there")
        if offsets[0] != 0 or offsets[-1] != len(ids) or (len(offsets) > 1 and bool((np.diff(offsets) < 0).any())):
            raise ValueError("checkpoint offsets out of order")
        index.by_start, index.sorted_start = by_start, sorted_start
        index.checkpoint_ids, index.checkpoint_offsets = ids, offsets
        return index

    @property
    def nbytes(self) -> int:
        return int(self.checkpoint_ids.nbytes + self.checkpoint_offsets.nbytes + self.by_start.nbytes
                   + self.sorted_start.nbytes)

    def open_at(self, i: int) -> np.ndarray:
        """Indices of intervals with start <= i < end."""
        cp = i // self.stride
        point = cp * self.stride
        base = self.checkpoint_ids[self.checkpoint_offsets[cp]:self.checkpoint_offsets[cp + 1]]
        lo = int(np.searchsorted(self.sorted_start, point, "right"))
        hi = int(np.searchsorted(self.sorted_start, i, "right"))
        recent = self.by_start[lo:hi]
        candidates: np.ndarray = np.concatenate([base.astype(np.int64), recent])
        live: np.ndarray = candidates[self.end[candidates] > i]
        return live


@dataclass
class AllocatorState:
    """Segments and live blocks after one event, each sorted by address."""

    index: int
    seg_addr: np.ndarray
    seg_size: np.ndarray
    seg_stream: np.ndarray
    seg_expandable: np.ndarray
    seg_final: np.ndarray  # index into the snapshot's segment table, or NONE
    blk_addr: np.ndarray
    blk_size: np.ndarray
    blk_state: np.ndarray  # ALLOCATED or PENDING_FREE
    blk_life: np.ndarray  # life index in DeviceModel.lives, or NONE
    blk_final: np.ndarray  # index into the snapshot's block table, or NONE
    blk_segment: np.ndarray  # index into this state's segments, or NONE if outside all
    # free_runs_per_segment, computed once: every view asks (the arrays above never change).
    _free_runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False,
                                                                           compare=False)

    @property
    def reserved(self) -> int:
        return int(self.seg_size.sum())

    @property
    def allocated(self) -> int:
        return int(self.blk_size[self.blk_state == ALLOCATED].sum())

    @property
    def active(self) -> int:
        return int(self.blk_size.sum())

    def segment_blocks(self, s: int) -> np.ndarray:
        """Indices of the blocks inside segment ``s``, by address."""
        return np.nonzero(self.blk_segment == s)[0]

    def free_per_segment(self) -> tuple[np.ndarray, np.ndarray]:
        """(free bytes, largest free run) of each segment: the gaps between live blocks."""
        free, largest, _ = self.free_runs_per_segment()
        return free, largest

    def free_runs_per_segment(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(free bytes, largest free run, number of free runs) of each segment.

        A free run is a maximal gap between live blocks (or a segment's edges): what the
        allocator keeps as one free ("inactive") block. Vectorised over all blocks at once.
        Blocks are sorted by address and segments too, so a segment's blocks are
        consecutive; a block's gap is its offset minus the furthest end of the blocks
        before it in its segment, and the tail gap runs from the furthest end to the
        segment's end.
        """
        if self._free_runs is None:
            self._free_runs = self._compute_free_runs()
        return self._free_runs

    def _compute_free_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(self.seg_addr)
        seg_size = self.seg_size.astype(np.int64)
        free_total = seg_size.copy()
        largest = np.zeros(n, np.int64)
        runs = np.zeros(n, np.int64)
        if n == 0:
            return free_total, largest, runs
        inside = np.nonzero(self.blk_segment != NONE)[0]
        seg = self.blk_segment[inside].astype(np.int64)
        if self.blk_addr.dtype == object or self.seg_addr.dtype == object:
            offset = np.array([int(b) - int(self.seg_addr[s]) for b, s in zip(self.blk_addr[inside], seg)], np.int64)
        else:
            offset = self.blk_addr[inside].astype(np.int64) - self.seg_addr.astype(np.int64)[seg]
        size = self.blk_size[inside].astype(np.int64)
        np.subtract.at(free_total, seg, size)
        end = offset + size
        # A running maximum that restarts per segment: lift each segment above the last.
        lift = seg * (int(end.max(initial=0)) + 1)
        furthest = np.maximum.accumulate(end + lift) - lift
        before = np.zeros(len(inside), np.int64)
        if len(inside) > 1:
            same = seg[1:] == seg[:-1]
            before[1:] = np.where(same, furthest[:-1], 0)
        gap = offset - before
        np.maximum.at(largest, seg, gap)
        np.add.at(runs, seg, gap > 0)
        tail_start = np.zeros(n, np.int64)
        np.maximum.at(tail_start, seg, end)
        tail = seg_size - tail_start
        runs += tail > 0
        return free_total, np.maximum(largest, tail), runs


class MappedRanges:
    """The address ranges mapped into expandable segments, after any event.

    The snapshot's expandable segments are the ranges mapped at the end. Undoing every
    segment_map/segment_unmap backwards from there gives the ranges mapped when the trace
    starts (including what was mapped before it); queries replay forwards from the
    nearest checkpoint.
    """

    CHECKPOINT_EVERY = 256  # map/unmap operations between stored range sets

    def __init__(self, device: DeviceModel) -> None:
        trace = device.trace
        range_ops = (act.SEGMENT_MAP, act.SEGMENT_UNMAP)
        ops = column_passes.positions(trace.action, range_ops) if device.has_any_action(range_ops) else \
            np.zeros(0, np.int64)
        if device.partial_trace:
            ops = ops[:0]  # a filtered trace is not replayed: the ranges mapped at the end, throughout
        self.op_index = ops
        self.op_map = trace.action[ops] == act.SEGMENT_MAP
        self.op_addr = [int(a) for a in trace.addr[ops]]
        self.op_size = [max(int(v), 0) for v in trace.size[ops]]
        self.op_stream = [int(v) for v in trace.stream[ops]]
        segs = device.segments
        self.final = {int(segs.address[k]): k for k in np.nonzero(segs.expandable)[0]}
        self.final_stream = {int(segs.address[k]): int(segs.stream[k]) for k in self.final.values()}
        self.final_size = {int(segs.address[k]): int(segs.total_size[k]) for k in self.final.values()}
        ranges = dict(self.final_size)
        for k in range(len(ops) - 1, -1, -1):  # undo, newest first
            if self.op_map[k]:
                ranges = _remove_range(ranges, self.op_addr[k], self.op_size[k])
            else:
                ranges = _add_range(ranges, self.op_addr[k], self.op_size[k])
        self.checkpoints = [dict(ranges)]
        for k in range(len(ops)):
            ranges = self._apply(ranges, k)
            if (k + 1) % self.CHECKPOINT_EVERY == 0:
                self.checkpoints.append(dict(ranges))

    def _apply(self, ranges: dict[int, int], k: int) -> dict[int, int]:
        if self.op_map[k]:
            return _add_range(ranges, self.op_addr[k], self.op_size[k])
        return _remove_range(ranges, self.op_addr[k], self.op_size[k])

    def ranges_at(self, i: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """(addresses, sizes, streams, final segment or NONE) mapped after event ``i``."""
        done = int(np.searchsorted(self.op_index, i, "right"))  # operations at or before i
        cp = done // self.CHECKPOINT_EVERY
        ranges = dict(self.checkpoints[cp])
        for k in range(cp * self.CHECKPOINT_EVERY, done):
            ranges = self._apply(ranges, k)
        addrs = sorted(ranges)
        # Each operation's size fits int64, their union need not (maps near 2^63 bytes in a
        # hostile trace): a range that long is kept as long as an int64 column holds.
        sizes = [min(ranges[a], INT64_MAX) for a in addrs]
        streams = [self.final_stream.get(a, 0) for a in addrs]
        # A range is the snapshot's own segment only while it has exactly that extent.
        final = [int(self.final[a]) if self.final_size.get(a) == ranges[a] else NONE for a in addrs]
        return addrs, sizes, streams, final


def _add_range(ranges: dict[int, int], addr: int, size: int) -> dict[int, int]:
    """Union of ``ranges`` (start → size, disjoint) with [addr, addr+size), merging neighbours."""
    if size <= 0:
        return ranges
    start, end = addr, addr + size
    out = {}
    for a, n in ranges.items():
        if a + n < start or a > end:
            out[a] = n
        else:
            start, end = min(start, a), max(end, a + n)
    out[start] = end - start
    return out


def _remove_range(ranges: dict[int, int], addr: int, size: int) -> dict[int, int]:
    """``ranges`` minus [addr, addr+size)."""
    if size <= 0:
        return ranges
    cut_start, cut_end = addr, addr + size
    out = {}
    for a, n in ranges.items():
        end = a + n
        if end <= cut_start or a >= cut_end:
            out[a] = n
            continue
        if a < cut_start:
            out[a] = cut_start - a
        if end > cut_end:
            out[cut_end] = end - cut_end
    return out


class Replayer:
    """Builds :class:`AllocatorState` for any event of one device."""

    def __init__(self, device: DeviceModel, indexed: bool = True) -> None:
        """``indexed=False`` builds the interval indexes on first use: the state before the
        first event (``state_at(-1)``) needs none, and on ten million events they take seconds."""
        self.device = device
        n = len(device.trace)
        self.n_events = n
        lives = device.lives
        # A filtered export holds some of the source's events: replaying them would make
        # impossible states (allocs whose frees were filtered out). Every moment then shows
        # the state at the source's end, from the file's own segments and blocks.
        self.partial = device.partial_trace
        if self.partial:
            self._life_start = np.full(len(lives), n, np.int64)
            self._life_end = np.full(len(lives), n, np.int64)
        else:
            # A life begun before the trace starts at NONE (-1), before every event: the
            # column as it is, never written (a copy of it was 40 MB of the first screen at 10M).
            self._life_start = lives.start
            self._life_end = np.where(lives.end == NONE, n, lives.end)
        if indexed:
            self.blocks = IntervalIndex(self._life_start, self._life_end, n)

        seg_lives = device.segment_lives
        # Expandable segments grow and shrink by segment_map/segment_unmap of address
        # ranges that need not pair up (one unmap can cover many maps), so they are
        # replayed as ranges (MappedRanges); only segment_alloc/free form lives here.
        starts = device.trace.action[np.maximum(seg_lives.start, 0)] if len(seg_lives) else np.zeros(0, np.int16)
        ends = device.trace.action[np.maximum(seg_lives.end, 0)] if len(seg_lives) else np.zeros(0, np.int16)
        is_range_op = ((seg_lives.start != NONE) & np.isin(starts, (act.SEGMENT_MAP, act.SEGMENT_UNMAP))) | (
            (seg_lives.end != NONE) & np.isin(ends, (act.SEGMENT_MAP, act.SEGMENT_UNMAP)))
        self._seg_start = np.where(seg_lives.start == NONE, -1, seg_lives.start)
        self._seg_end = np.where(seg_lives.end == NONE, n, seg_lives.end)
        self._seg_end[is_range_op] = -1  # never open
        self._seg_start[is_range_op] = n
        if self.partial:
            self._seg_start[:] = n
            self._seg_end[:] = n
        if indexed:
            self.segments = IntervalIndex(self._seg_start, self._seg_end, n)
        self._seg_stream = (device.trace.stream[np.maximum(seg_lives.start, np.maximum(seg_lives.end, 0))]
                            if len(seg_lives) else np.zeros(0, np.int64))
        self.mapped = MappedRanges(device)
        self._pre_blocks, self._pre_segments, self._seg_life_final = self._pre_trace()
        # A trace recorded with skip_actions=["segment_alloc", "segment_free"] has block
        # events and no segment events: memory it shows in a segment the snapshot no longer
        # lists (emptied from the cache since) stands in a segment of its own extent.
        self._infer_segments = not self.partial and len(lives) > 0 and not device.has_any_action(
            act.SEGMENT_ACTIONS)
        # The lives that are a block of the snapshot's end, sorted, and that block: a few
        # thousand, searched (a column of every life was 26 MB written before the first screen at 10M).
        linked = np.nonzero(device.block_life != NONE)[0]
        order = np.argsort(device.block_life[linked], kind="stable")
        self._linked_lives = device.block_life[linked][order].astype(np.int64)
        self._linked_blocks = linked[order].astype(np.int64)

    @cached_property
    def life_bytes(self) -> np.ndarray:
        """Bytes each life occupies in its segment (:func:`block_bytes`): a column of every
        life, made when first asked for; a state takes its open lives' bytes alone."""
        return block_bytes(self.device)

    def _final_of(self, lives: np.ndarray) -> np.ndarray:
        """The block of the snapshot's end each of ``lives`` is, or NONE (where two blocks name
        one life, the later)."""
        if not len(self._linked_lives):
            return np.full(len(lives), NONE, np.int64)
        at = np.searchsorted(self._linked_lives, lives, "right") - 1
        safe = np.maximum(at, 0)
        return np.where((at >= 0) & (self._linked_lives[safe] == lives), self._linked_blocks[safe], NONE)

    def _bytes_of(self, lives: np.ndarray, finals: np.ndarray) -> np.ndarray:
        """``life_bytes[lives]``, given each life's final block (``_final_of``), without the
        whole column where it is not made yet."""
        if "life_bytes" in self.__dict__:
            made: np.ndarray = self.life_bytes[lives]
            return made
        sizes = rounded_block_sizes(self.device.lives.size[lives])
        linked = finals != NONE
        sizes[linked] = self.device.blocks.size[finals[linked]]
        return sizes

    @property
    def nbytes(self) -> int:
        """Memory held by the checkpoints, reported by benchmarks and the TUI."""
        return self.blocks.nbytes + self.segments.nbytes

    def _pre_trace(self) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
        dev = self.device
        blocks = dev.blocks
        active = (blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE)
        pre_blocks = np.nonzero(active & ((dev.block_life == NONE) | self.partial))[0]
        # A final segment is covered by the trace if a segment life at its address is still open.
        open_lives = {}
        seg_lives = dev.segment_lives
        for life in np.nonzero(seg_lives.end == NONE)[0]:
            open_lives[int(seg_lives.addr[life])] = int(life)
        pre_segments = []
        life_final: dict[int, int] = {}
        for s in range(len(dev.segments)):
            addr = int(dev.segments.address[s])
            if dev.segments.expandable[s]:
                continue  # replayed by MappedRanges
            if addr in open_lives and not self.partial:
                life_final[open_lives[addr]] = s
            else:
                pre_segments.append(s)
        return pre_blocks, np.asarray(pre_segments, np.int64), life_final

    @property
    def indexed(self) -> bool:
        """Whether both interval indexes are built (see :meth:`build_indexes`)."""
        return "blocks" in self.__dict__ and "segments" in self.__dict__

    def build_indexes(self) -> None:
        """Build both interval indexes now (a worker does, after the first screen): until
        then :meth:`state_at` finds the open lives by one pass over them instead."""
        getattr(self, "blocks")  # noqa: B009 (built by __getattr__ where missing)
        getattr(self, "segments")  # noqa: B009

    def kept_indexes(self) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """Both built indexes as arrays and their strides, to keep beside the model cache."""
        arrays = {f"{name}.{key}": value for name in ("blocks", "segments")
                  for key, value in getattr(self, name).kept_arrays().items()}
        return arrays, {name: getattr(self, name).stride for name in ("blocks", "segments")}

    def adopt_indexes(self, arrays: dict[str, np.ndarray], strides: dict[str, int]) -> None:
        """Both indexes from :meth:`kept_indexes` of an earlier open of the same model;
        ValueError (and nothing changed) when they do not fit this replayer."""
        blocks = IntervalIndex.from_kept(self._life_start, self._life_end, self.n_events, strides["blocks"],
                                         {k: arrays[f"blocks.{k}"] for k in IntervalIndex.KEPT})
        segments = IntervalIndex.from_kept(self._seg_start, self._seg_end, self.n_events, strides["segments"],
                                           {k: arrays[f"segments.{k}"] for k in IntervalIndex.KEPT})
        self.blocks, self.segments = blocks, segments

    def _open(self, name: str, start: np.ndarray, end: np.ndarray, i: int) -> np.ndarray:
        # The index where it is built; else every interval checked, which is what the index
        # answers too (the state sorts what it finds by address, so their order is no matter).
        index: IntervalIndex | None = self.__dict__.get(name)
        if index is not None:
            return index.open_at(i)
        found: np.ndarray = np.nonzero((start <= i) & (end > i))[0]
        return found

    def __getattr__(self, name: str) -> IntervalIndex:
        # Only reached for an index not built yet (indexed=False): build it now.
        if name == "blocks":
            self.blocks = IntervalIndex(self._life_start, self._life_end, self.n_events)
            return self.blocks
        if name == "segments":
            self.segments = IntervalIndex(self._seg_start, self._seg_end, self.n_events)
            return self.segments
        raise AttributeError(name)

    def state_at(self, i: int) -> AllocatorState:
        """State after event ``i`` (``i = -1``: before the first event). The last one asked
        for is kept: the views of one screen ask for the same event (the explorer's first
        screen three times, each a pass over every allocation where no index is built yet);
        its arrays are read-only, as every state's are meant to be."""
        i = int(min(max(i, -1), self.n_events - 1)) if self.n_events else -1
        latest: AllocatorState | None = self.__dict__.get("_latest")  # (__getattr__ builds indexes only)
        if latest is not None and latest.index == i:
            return latest
        state = self._state_at(i)
        for f in fields(state):
            value = getattr(state, f.name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        self._latest = state
        return state

    def _open_lives(self, i: int) -> np.ndarray:
        """The lives open after event ``i`` (``i >= 0``): from the index where it is built,
        else from the last state asked for where that is near (a key that moves the cursor by
        an event, at ten million events: 8 ms a pass over 3.3 million lives, more while the
        index is being built beside it), else by a pass over every life."""
        latest: AllocatorState | None = self.__dict__.get("_latest")
        if ("blocks" in self.__dict__ or latest is None or latest.index < 0
                or abs(i - latest.index) > NEAR_EVENTS):
            return self._open("blocks", self._life_start, self._life_end, i)
        # A life opens or closes only at one of its own events: those between the two
        # moments name every life whose openness differs.
        lo, hi = sorted((i, latest.index))
        touched = np.sort(self.device.lives.event_life[lo + 1:hi + 1].astype(np.int64))
        touched = touched[touched != NONE]
        if len(touched):  # each once (np.unique would import numpy.ma: 20-40 ms on the first key)
            touched = touched[np.concatenate(([True], touched[1:] != touched[:-1]))]
        # A flag per life, not a search: a leaky trace has a million lives open.
        flagged = np.zeros(len(self._life_start), bool)
        flagged[touched] = True
        before = latest.blk_life[latest.blk_life != NONE]
        kept = before[~flagged[before]]
        opened = touched[(self._life_start[touched] <= i) & (self._life_end[touched] > i)]
        return np.concatenate([kept, opened])

    def _state_at(self, i: int) -> AllocatorState:
        dev = self.device
        lives = self._open_lives(i) if i >= 0 else np.nonzero(self._life_start < 0)[0]
        # In one order whichever way they were found: lives that share an address (one begun
        # before the trace, after one that ended) keep it through the sort by address below.
        lives = np.sort(lives)
        if i < 0:
            lives = lives[self._life_end[lives] > -1]
        request = dev.lives.request[lives]
        pending = (request != NONE) & (request <= i)  # a free requested at or before i, not yet done
        seg_lives = (self._open("segments", self._seg_start, self._seg_end, i) if i >= 0
                     else np.nonzero(self._seg_start < 0)[0])

        pre_b = self._pre_blocks
        blk_addr = _concat(dev.lives.addr[lives], dev.blocks.address[pre_b])
        finals = self._final_of(lives)
        blk_size = np.concatenate([self._bytes_of(lives, finals), dev.blocks.size[pre_b].astype(np.int64)])
        pre_state = np.where(dev.blocks.state[pre_b] == PENDING_FREE, PENDING_FREE, ALLOCATED)
        blk_state = np.concatenate([np.where(pending, PENDING_FREE, ALLOCATED), pre_state]).astype(np.int8)
        blk_life = np.concatenate([lives, np.full(len(pre_b), NONE)]).astype(np.int64)
        blk_final = np.concatenate([finals, pre_b.astype(np.int64)])

        pre_s = self._pre_segments
        map_addr, map_size, map_stream, map_final = self.mapped.ranges_at(i)
        seg_addr = _concat(_concat(dev.segment_lives.addr[seg_lives], dev.segments.address[pre_s]),
                           np.asarray(map_addr, dtype=np.int64 if not map_addr or max(map_addr) < 1 << 63 else object))
        seg_size = np.concatenate([dev.segment_lives.size[seg_lives], dev.segments.total_size[pre_s].astype(np.int64),
                                   np.asarray(map_size, np.int64)])
        seg_stream = np.concatenate([np.asarray(self._seg_stream[seg_lives], np.int64) if len(seg_lives) else
                                     np.zeros(0, np.int64), dev.segments.stream[pre_s].astype(np.int64),
                                     np.asarray(map_stream, np.int64)])
        seg_expandable = np.concatenate([np.zeros(len(seg_lives), bool), dev.segments.expandable[pre_s],
                                         np.ones(len(map_addr), bool)])
        seg_final = np.concatenate([
            np.array([self._seg_life_final.get(int(s), NONE) for s in seg_lives], np.int64),
            pre_s.astype(np.int64), np.asarray(map_final, np.int64)])

        order = _argsort(seg_addr)
        seg_addr, seg_size, seg_stream = seg_addr[order], seg_size[order], seg_stream[order]
        seg_expandable, seg_final = seg_expandable[order], seg_final[order]
        order = _argsort(blk_addr)
        blk_addr, blk_size, blk_state = blk_addr[order], blk_size[order], blk_state[order]
        blk_life, blk_final = blk_life[order], blk_final[order]
        blk_segment = _segment_of(blk_addr, seg_addr, seg_size)
        if self._infer_segments and (blk_segment == NONE).any():
            orphan = blk_segment == NONE
            starts = np.where(blk_life[orphan] != NONE, dev.lives.start[np.maximum(blk_life[orphan], 0)], NONE)
            streams = np.where(starts != NONE, dev.trace.stream[np.maximum(starts, 0)], 0).astype(np.int64)
            seg_addr = _concat(seg_addr, blk_addr[orphan])
            seg_size = np.concatenate([seg_size, blk_size[orphan].astype(np.int64)])
            seg_stream = np.concatenate([seg_stream, streams])
            seg_expandable = np.concatenate([seg_expandable, np.zeros(int(orphan.sum()), bool)])
            seg_final = np.concatenate([seg_final, np.full(int(orphan.sum()), NONE, np.int64)])
            order = _argsort(seg_addr)
            seg_addr, seg_size, seg_stream = seg_addr[order], seg_size[order], seg_stream[order]
            seg_expandable, seg_final = seg_expandable[order], seg_final[order]
            blk_segment = _segment_of(blk_addr, seg_addr, seg_size)
        return AllocatorState(i, seg_addr, seg_size, seg_stream, seg_expandable, seg_final,
                              blk_addr, blk_size, blk_state, blk_life, blk_final, blk_segment)

    def allocated_at(self, i: int) -> int:
        return self.state_at(i).allocated


def block_bytes(device: DeviceModel) -> np.ndarray:
    """Bytes each life occupies in its segment.

    The trace records the requested size; the allocator rounds it up (to 512 bytes, and
    a large block may keep an unsplit remainder). The snapshot's block table has the real
    size of every block still live, so it wins; other lives get the 512-byte rounding.
    """
    rounded = rounded_block_sizes(device.lives.size)
    linked = device.block_life != NONE
    rounded[device.block_life[linked]] = device.blocks.size[linked].astype(np.int64)
    return rounded


def rounded_block_sizes(sizes: np.ndarray) -> np.ndarray:
    """Requested ``sizes`` rounded up as the allocator rounds them, as a new int64 array."""
    # In place on one copy: three temporaries of every life cost more than the arithmetic.
    # MIN_BLOCK_SIZE is a power of two, so clearing the low bits is the floor to its multiple
    # (for negative sums too, in two's complement) at half the time of a division and a product.
    rounded = sizes.astype(np.int64)
    rounded += MIN_BLOCK_SIZE - 1
    rounded &= -MIN_BLOCK_SIZE
    np.maximum(rounded, 0, out=rounded)  # a size of 0 or less (never a real block) takes no bytes
    return rounded


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return np.concatenate([a.astype(object), b.astype(object)])
    return np.concatenate([a.astype(np.int64), b.astype(np.int64)]) if a.dtype != np.uint64 and \
        b.dtype != np.uint64 else np.concatenate([a.astype(np.uint64), b.astype(np.uint64)])


def _argsort(values: np.ndarray) -> np.ndarray:
    return np.argsort(values, kind="stable")


def _segment_of(blk_addr: np.ndarray, seg_addr: np.ndarray, seg_size: np.ndarray) -> np.ndarray:
    """For each block, the index of the segment containing its start, or NONE."""
    if len(seg_addr) == 0 or len(blk_addr) == 0:
        return np.full(len(blk_addr), NONE, np.int64)
    pos = np.searchsorted(seg_addr, blk_addr, "right") - 1
    ok = pos >= 0
    safe = np.maximum(pos, 0)
    ends = seg_addr[safe] + seg_size[safe].astype(seg_addr.dtype) if seg_addr.dtype != object else \
        np.array([int(a) + int(s) for a, s in zip(seg_addr[safe], seg_size[safe])], object)
    ok &= blk_addr < ends
    return np.where(ok, pos, NONE)
