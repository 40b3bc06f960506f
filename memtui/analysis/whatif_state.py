"""A simulated run as the explorer shows a recorded one: the state at an event, the curves.

:class:`SimulatedRun` replays a recording's requests under other settings (memtui/allocator)
and answers what the explorer's segment map and timeline ask of a recording: the allocator's
state after an event (an :class:`~memtui.replay.AllocatorState`, the same type the recorded
replay gives, so the same widgets draw it) and the allocated and reserved bytes after every
event. Stepping forward continues the replay; stepping back starts it again.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from memtui.allocator import native_replay
from memtui.allocator.blocks import Block
from memtui.allocator.replay import Requests, Stepper, replay
from memtui.allocator.settings import AllocatorSettings
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.replay import AllocatorState

# A segment being gathered: [address, size so far, stream, expandable]; a live block: (address,
# size, state, slot).
SegmentRow = list[int]
BlockRow = tuple[int, int, int, int]


class SimulatedRun:
    def __init__(self, requests: Requests, settings: AllocatorSettings, limit: int | None = None,
                 per_process: bool = False) -> None:
        self.requests, self.settings, self.limit, self.per_process = requests, settings, limit, per_process
        self._stepper: Stepper | None = None
        self.outcome = replay(requests, settings, limit=limit, per_process=per_process, series=True)

    @property
    def stopped_at(self) -> int | None:
        """The event where this allocator could not serve what the recording served (its run ends there)."""
        return self.outcome.stopped_at

    def curves(self, n_events: int) -> tuple[np.ndarray, np.ndarray]:
        """(allocated, reserved) after each of the trace's events; after the replay stopped, flat."""
        out = self.outcome
        allocated, reserved = np.zeros(n_events, np.int64), np.zeros(n_events, np.int64)
        if out.series_event is None or not len(out.series_event) or not n_events:
            return allocated, reserved
        events = np.asarray(out.series_event, np.int64)
        # Each event takes the figures after its last request; events without a request keep the last ones.
        last = np.searchsorted(events, np.arange(n_events), "right") - 1
        has = last >= 0
        # The replay sets the three series together (allocator/replay.py, native_replay.py).
        allocated[has] = cast(np.ndarray, out.series_allocated)[last[has]]
        reserved[has] = cast(np.ndarray, out.series_reserved)[last[has]]
        start = sum(s.size for s in self.requests.initial)
        reserved[~has] = start
        allocated[~has] = sum(size for s in self.requests.initial for _, size, _, pending in s.blocks if not pending)
        return allocated, reserved

    def segment_events(self) -> np.ndarray:
        """Trace events at which the simulated allocator made segment events, sorted, distinct."""
        return np.unique(np.array([e for _, _, _, e in self.outcome.events], np.int64))

    def state_at(self, i: int) -> AllocatorState:
        """The simulated allocator's state after event ``i``: from the compiled loop where memtui
        has it (a replay to ``i`` in milliseconds), else by stepping the Python model."""
        if native_replay.can_replay(self.requests):
            out = replay(self.requests, self.settings, limit=self.limit, per_process=self.per_process,
                         until_event=i, dump_state=True)
            if out.block_table is not None:
                return state_of_table(out.block_table, i)
        stepper = self._stepper
        if stepper is None or stepper.last_event > i:
            stepper = self._stepper = Stepper(self.requests, self.settings, limit=self.limit,
                                              per_process=self.per_process)
        stepper.run(i)
        return state_of(stepper, i)


def state_of(stepper: Stepper, index: int) -> AllocatorState:
    """The stepper's allocator as an AllocatorState: one segment per cudaMalloc, or per mapped
    run of an expandable segment (as torch's snapshot lists them); blocks allocated or pending."""
    sim = stepper.sim
    seen: set[int] = set()
    heads: list[Block] = []
    candidates: list[Block] = list(stepper.slots.values()) + list(sim.pending.values())
    for pool in sim.pools.values():
        candidates += list(pool.blocks.values())
    for candidate in candidates:
        head = candidate
        while head.prev is not None:
            head = head.prev
        if id(head) not in seen:
            seen.add(id(head))
            heads.append(head)
    seg_rows: list[SegmentRow] = []
    blk_rows: list[BlockRow] = []
    for head in heads:
        block: Block | None = head
        run: SegmentRow | None = None
        while block is not None:
            if block.mapped:
                if run is None:
                    run = [block.addr, 0, block.stream, block.segment is not None]
                    seg_rows.append(run)
                run[1] += block.size
                if block.allocated or block.pending:
                    blk_rows.append((block.addr, block.size, PENDING_FREE if block.pending else ALLOCATED,
                                     block.slot if block.slot >= 0 else NONE))
            else:
                run = None
            block = block.next
    return _state(index, seg_rows, blk_rows)


def _state(index: int, seg_rows: list[SegmentRow], blk_rows: list[BlockRow]) -> AllocatorState:
    seg_rows.sort()
    blk_rows.sort()
    seg_addr = np.array([r[0] for r in seg_rows], np.int64)
    seg_size = np.array([r[1] for r in seg_rows], np.int64)
    blk_addr = np.array([r[0] for r in blk_rows], np.int64)
    blk_segment = np.searchsorted(seg_addr, blk_addr, "right").astype(np.int64) - 1
    return AllocatorState(
        index=index, seg_addr=seg_addr, seg_size=seg_size,
        seg_stream=np.array([r[2] for r in seg_rows], np.int64),
        seg_expandable=np.array([r[3] for r in seg_rows], bool),
        seg_final=np.full(len(seg_rows), NONE, np.int64), blk_addr=blk_addr,
        blk_size=np.array([r[1] for r in blk_rows], np.int64), blk_state=np.array([r[2] for r in blk_rows], np.int8),
        blk_life=np.array([r[3] for r in blk_rows], np.int64), blk_final=np.full(len(blk_rows), NONE, np.int64),
        blk_segment=blk_segment)


def state_of_table(table: np.ndarray, index: int) -> AllocatorState:
    """The compiled loop's block table (replay's ``dump_state``) as an AllocatorState, by the
    same rule as :func:`state_of`: mapped runs of each chain of blocks are segments."""
    live = table[table[:, 1] == 1]
    if not len(live):
        return _state(index, [], [])
    by_index = {int(row[0]): row for row in live}
    following: dict[int, int] = {int(row[9]): int(row[0]) for row in live if row[9] >= 0}
    seg_rows: list[SegmentRow] = []
    blk_rows: list[BlockRow] = []
    for row in live:
        if row[9] >= 0:
            continue  # not the first block of its chain
        q = int(row[0])
        run: SegmentRow | None = None
        while q in by_index:
            _, _, addr, size, stream, flags, mapped, expandable, slot, _ = (int(v) for v in by_index[q])
            if mapped:
                if run is None:
                    run = [addr, 0, stream, bool(expandable)]
                    seg_rows.append(run)
                run[1] += size
                if flags:
                    blk_rows.append((addr, size, PENDING_FREE if flags & 2 else ALLOCATED, slot if slot >= 0 else NONE))
            else:
                run = None
            q = following.get(q, -1)
    return _state(index, seg_rows, blk_rows)
