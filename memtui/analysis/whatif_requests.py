"""A recording's request stream, for the allocator model (memtui/allocator).

What the program asked of the allocator is in the trace: every ``alloc`` (size, stream,
pool), every ``free_requested`` (and, when the block was used on other streams, the later
``free_completed``), the request an ``oom`` entry reports, and ``torch.cuda.empty_cache()``
calls, seen as bursts of ``segment_free``/``segment_unmap`` that no request caused.

A burst belongs to a request when it leads, through nothing but more segment events and
completed frees, to that request's new segment and ``alloc`` (torch freed its cache and
retried) or to an ``oom``; when both ends carry a stack and the stacks differ, the burst was
``empty_cache`` after all. Every other burst is an ``empty_cache`` call. The recorded device's
refusals become hints: the replay under the recorded settings is told the memory the device
let the process have at exactly those requests (the reserved bytes right after them), so it
can be checked event for event.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from memtui.allocator.replay import (
    ALLOC,
    COMPLETE,
    EMPTY_CACHE,
    FREE,
    FREE_PENDING,
    NO_HINT,
    OOM_REQUEST,
    InitialSegment,
    Requests,
    consistent_initial,
)
from memtui.allocator.simulator import K_SMALL_BUFFER
from memtui.model import DeviceModel
from memtui.model import actions as act
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE, PoolId
from memtui.replay import Replayer

RELEASE_ACTIONS = (act.SEGMENT_FREE, act.SEGMENT_UNMAP)
GROW_ACTIONS = (act.SEGMENT_ALLOC, act.SEGMENT_MAP)


def build_requests(dev: DeviceModel) -> Requests:
    trace = dev.trace
    n = len(trace)
    action = trace.action
    size = trace.size.astype(np.int64)
    lives = dev.lives
    event_life = lives.event_life

    kind = np.full(n, -1, np.int8)
    kind[(action == act.ALLOC) & (event_life >= 0)] = ALLOC
    kind[action == act.OOM] = OOM_REQUEST
    kind[action == act.FREE] = FREE
    # A free whose completion is the next event (or that ends the life itself) is immediate;
    # the other completions come later, when the other streams' uses are done.
    req = np.flatnonzero((action == act.FREE_REQUESTED) & (event_life >= 0))
    end = lives.end[event_life[req]].astype(np.int64)
    kind[req] = np.where((end == req) | (end == req + 1), FREE, FREE_PENDING)
    done = np.flatnonzero((action == act.FREE_COMPLETED) & (event_life >= 0))
    asked = lives.request[event_life[done]].astype(np.int64)
    kind[done[(asked != NONE) & (asked != done - 1)]] = COMPLETE
    # A completion whose request came before the trace began: the replayed state at the first
    # event holds that block as allocated, and it returns to the cache here.
    kind[done[asked == NONE]] = FREE

    pools, pool = _pools(dev, action)
    reserved_after, initial = _recorded_reserved(dev, action, size, pools)
    hint = np.full(n, NO_HINT, np.int64)
    freeable: dict[int, tuple[int, ...]] = {}  # empty_cache event -> the private pools it freed
    retried: list[tuple[int, int]] = []
    for start, target in _bursts(dev, action):
        if target >= 0:
            hint[target] = reserved_after[target]
            if action[target] == act.ALLOC:
                retried.append((start, target))
        else:
            kind[start] = EMPTY_CACHE
            freed = {int(pool[i]) for i in range(start, _burst_end(action, start)) if pool[i] >= 0}
            if freed:
                freeable[start] = tuple(sorted(freed))
    hint[action == act.OOM] = reserved_after[action == act.OOM]

    rows = np.flatnonzero(kind >= 0)
    requests = Requests(
        kind=kind[rows], slot=event_life[rows].astype(np.int64), size=size[rows],
        stream=trace.stream[rows].astype(np.int64),
        pool=pool[rows].astype(np.int32), event=rows, hint=hint[rows], pools=pools, n_events=n)
    position = {int(e): k for k, e in enumerate(rows.tolist())} if freeable else {}
    requests.freeable = {position[e]: p for e, p in freeable.items() if e in position}
    requests.initial = initial
    requests.retried = retried
    ooms = dev.oom_indices()
    requests.process_cap = bool(len(ooms)) and bool((trace.device_free[ooms].astype(np.int64) > size[ooms]).any())
    seg_alloc = np.flatnonzero(action == act.SEGMENT_ALLOC)
    requests.recorded_segments = list(zip(trace.addr[seg_alloc].tolist(), size[seg_alloc].tolist()))
    addrs = [a for a, _ in requests.recorded_segments] + [s.addr for s in initial]
    requests.lowest_address = min(addrs) if addrs else 0
    return requests


def recorded_segment_events(dev: DeviceModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(event index, action code, size) of every segment event the recording holds."""
    action = dev.trace.action
    rows = np.flatnonzero(np.isin(action, act.SEGMENT_ACTIONS))
    return rows, action[rows].astype(np.int64), dev.trace.size[rows].astype(np.int64)


def _recorded_reserved(dev: DeviceModel, action: np.ndarray, size: np.ndarray, pools: list[PoolId]
                       ) -> tuple[np.ndarray, list[InitialSegment]]:
    """Reserved bytes after each event, and the segments there before the first one."""
    delta = _segment_deltas(action, size)
    traced_change = int(delta.sum())
    starts_mid_run = bool(len(dev.lives)) and bool((dev.lives.start == NONE).any())
    initial: list[InitialSegment] = []
    before = 0
    if starts_mid_run or dev.reserved != traced_change:
        initial = _initial_segments(dev, pools)
        before = sum(s.size for s in initial)
    return before + np.cumsum(delta), initial


def _segment_deltas(action: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The bytes each event's segment event adds to what is reserved (a release: negative)."""
    delta = np.zeros(len(action), np.int64)
    grow, shrink = np.isin(action, GROW_ACTIONS), np.isin(action, RELEASE_ACTIONS)
    delta[grow], delta[shrink] = size[grow], -size[shrink]
    return delta


def recorded_reserved(dev: DeviceModel, requests: Requests) -> np.ndarray:
    """Reserved bytes after each event as the trace records them, from the layout it starts
    with (build_requests reads the same curve for its hints)."""
    return requests.initial_reserved + np.cumsum(_segment_deltas(dev.trace.action, dev.trace.size.astype(np.int64)))


def _initial_segments(dev: DeviceModel, pools: list[PoolId]) -> list[InitialSegment]:
    """The state memtui's replay reconstructs before the first event (a trace that starts mid-run)."""
    state = Replayer(dev, indexed=False).state_at(-1)
    out = []
    final_pools = dev.segments.pools if len(dev.segments) else []
    for s in range(len(state.seg_addr)):
        addr, seg_size = int(state.seg_addr[s]), int(state.seg_size[s])
        final = int(state.seg_final[s])
        # Only the small pool makes 2 MiB segments (large ones are 20 MiB or at least 10).
        small = seg_size == K_SMALL_BUFFER and not bool(state.seg_expandable[s])
        pool_id = tuple(final_pools[int(dev.segments.pool[final])]) if final != NONE and len(final_pools) else None
        blocks = []
        for b in state.segment_blocks(s).tolist():
            if int(state.blk_state[b]) not in (ALLOCATED, PENDING_FREE):
                continue
            life = int(state.blk_life[b])
            slot = life if life != NONE else -2 - b  # a block no event frees stays allocated
            blocks.append((int(state.blk_addr[b]), int(state.blk_size[b]), slot,
                           int(state.blk_state[b]) == PENDING_FREE))
        pool = pools.index(pool_id) if pool_id in pools else -1
        out.append(InitialSegment(addr, seg_size, int(state.seg_stream[s]), pool, small,
                                  bool(state.seg_expandable[s]), blocks))
    # A trace that contradicts itself gives overlapping blocks and segments here.
    return consistent_initial(out)


def _pools(dev: DeviceModel, action: np.ndarray) -> tuple[list[PoolId], np.ndarray]:
    """Private pools: the pool_id newer torch records on each entry, else the pool of the
    snapshot's segment holding the address; -1 for the default pool."""
    trace = dev.trace
    n = len(action)
    out = np.full(n, -1, np.int32)
    names: list[PoolId] = []
    if (trace.pool >= 0).any():
        index: dict[int, int] = {}
        for k, pid in enumerate(trace.pools):
            pid = tuple(pid)
            if pid != (0, 0):
                index[k] = len(names)
                names.append(pid)
        for k, position in index.items():
            out[trace.pool == k] = position
        return names, out
    segs = dev.segments
    if not len(segs) or all(tuple(p) == (0, 0) for p in segs.pools):
        return names, out
    pool_names = [tuple(p) for p in segs.pools]
    for p in pool_names:
        if p != (0, 0) and p not in names:
            names.append(p)
    addr = trace.addr
    pos = np.searchsorted(segs.address, addr, "right") - 1
    inside = (pos >= 0) & (addr < segs.address[np.maximum(pos, 0)] + segs.total_size[np.maximum(pos, 0)])
    seg_pool = np.array([names.index(p) if p != (0, 0) else -1 for p in pool_names], np.int32)
    out[inside] = seg_pool[segs.pool[pos[inside]]]
    return names, out


def _burst_end(action: np.ndarray, start: int) -> int:
    j = start
    while j < len(action) and action[j] in (act.SEGMENT_FREE, act.SEGMENT_UNMAP, act.FREE_COMPLETED):
        j += 1
    return j


def _bursts(dev: DeviceModel, action: np.ndarray) -> Iterator[tuple[int, int]]:
    """(first event, the alloc/oom it belongs to or -1 for empty_cache) of each release burst."""
    releases = np.flatnonzero(np.isin(action, RELEASE_ACTIONS))
    if not len(releases):
        return
    stack = dev.trace.stack
    n = len(action)
    j_done = -1
    for start in releases.tolist():
        if start < j_done:
            continue
        j = _burst_end(action, start)
        j_done = j
        k = j
        while k < n and action[k] in GROW_ACTIONS:
            k += 1
        target = -1
        if k < n and action[k] == act.OOM and k == j:
            target = k
        elif k < n and action[k] == act.ALLOC and k > j:
            a, b = int(stack[start]), int(stack[k])
            target = -1 if (a >= 0 and b >= 0 and a != b) else k
        elif k < n and action[k] == act.OOM:
            target = k
        yield start, target
