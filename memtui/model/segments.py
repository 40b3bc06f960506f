"""Segments and blocks at snapshot time, as columns.

Segments are sorted by address; each owns a contiguous run of rows in the block table
(``block_start``/``block_count``), blocks sorted by address inside their segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.model.columns import int_column
from memtui.model.frames import StackTable
from memtui.model.strings import StringTable, terminal_safe, text_of

# A memory pool's id as torch writes it (a pair of ints), or its parts as text when they are not ints.
PoolId = tuple[Any, ...]

ALLOCATED = 0
PENDING_FREE = 1
INACTIVE = 2
BLOCK_STATES = ["active_allocated", "active_pending_free", "inactive"]
DEFAULT_POOL = (0, 0)

# State codes are int16; names past this many (a broken or hostile file) share one code.
MAX_STATE_NAMES = 4096
OTHER_STATES = "(other states)"


@dataclass
class SegmentTable:
    """The snapshot's segments of one device, a column per field."""

    address: np.ndarray
    total_size: np.ndarray
    allocated_size: np.ndarray
    active_size: np.ndarray
    requested_size: np.ndarray
    stream: np.ndarray
    segment_type: np.ndarray  # string id
    pool: np.ndarray  # index into ``pools``
    expandable: np.ndarray
    stack: np.ndarray
    block_start: np.ndarray
    block_count: np.ndarray
    pools: list[PoolId]
    fwd: np.ndarray  # stack id of the segment's forward_frames, -1 when none

    def __len__(self) -> int:
        return len(self.address)


@dataclass
class BlockTable:
    """The blocks of the snapshot's segments of one device, a column per field."""

    address: np.ndarray
    size: np.ndarray
    requested_size: np.ndarray
    state: np.ndarray  # code into ``state_names``
    stack: np.ndarray
    segment: np.ndarray
    state_names: list[str]
    fwd: np.ndarray  # stack id of the block's forward_frames (allocated in backward), -1 when none

    def __len__(self) -> int:
        return len(self.address)

    def state_counts(self) -> dict[str, int]:
        counts = np.bincount(self.state.astype(np.int64), minlength=len(self.state_names))
        return {name: int(c) for name, c in zip(self.state_names, counts) if c}


def build_segments(
    segments: list[dict[str, Any]], stacks: StackTable, strings: StringTable, warnings: list[str]
) -> tuple[SegmentTable, BlockTable]:
    """Columns for the given segments (all of one device)."""
    segments = sorted(segments, key=lambda s: _sortable(s.get("address")))
    state_names = list(BLOCK_STATES)
    state_codes = {name: code for code, name in enumerate(state_names)}
    pools: list[PoolId] = []
    pool_ids: dict[PoolId, int] = {}

    seg_pool, seg_type, seg_stack, seg_fwd, block_start, block_count = [], [], [], [], [], []
    b_addr: list[object]
    b_size: list[object]
    b_req: list[object]
    b_state: list[int]
    b_stack: list[int]
    b_seg: list[int]
    b_fwd: list[int]
    b_addr, b_size, b_req, b_state, b_stack, b_seg, b_fwd = [], [], [], [], [], [], []
    for si, seg in enumerate(segments):
        pool = _pool_key(seg.get("segment_pool_id", (0, 0)))
        if pool not in pool_ids:
            pool_ids[pool] = len(pools)
            pools.append(pool)
        seg_pool.append(pool_ids[pool])
        seg_type.append(strings.intern(seg.get("segment_type", "large")))
        seg_stack.append(stacks.intern(seg.get("frames")))
        seg_fwd.append(stacks.intern_forward(seg.get("forward_frames")))
        blocks = sorted(seg["blocks"], key=lambda b: _sortable(b.get("address")))
        block_start.append(len(b_addr))
        block_count.append(len(blocks))
        for block in blocks:
            state = _state_name(block.get("state", "inactive"))
            if state not in state_codes:
                if len(state_names) >= MAX_STATE_NAMES:
                    state = OTHER_STATES
                if state not in state_codes:
                    state_codes[state] = len(state_names)
                    state_names.append(state)
            b_addr.append(block["address"])
            b_size.append(block["size"])
            b_req.append(block["requested_size"])
            b_state.append(state_codes[state])
            b_stack.append(stacks.intern(block.get("frames")))
            b_fwd.append(stacks.intern_forward(block.get("forward_frames")))
            b_seg.append(si)

    def col(key: str, wide: bool = False) -> np.ndarray:
        return int_column([s.get(key, 0) for s in segments], f"segment {key}", warnings, wide=wide)

    seg_table = SegmentTable(
        address=col("address", wide=True),
        total_size=col("total_size"),
        allocated_size=col("allocated_size"),
        active_size=col("active_size"),
        requested_size=col("requested_size"),
        stream=col("stream"),
        segment_type=np.asarray(seg_type, np.int32),
        pool=np.asarray(seg_pool, np.int32),
        expandable=np.array([bool(s.get("is_expandable")) for s in segments], bool),
        stack=np.asarray(seg_stack, np.int32),
        block_start=np.asarray(block_start, np.int64),
        block_count=np.asarray(block_count, np.int64),
        pools=pools,
        fwd=np.asarray(seg_fwd, np.int32),
    )
    block_table = BlockTable(
        address=int_column(b_addr, "block address", warnings, wide=True),
        size=int_column(b_size, "block size", warnings),
        requested_size=int_column(b_req, "block requested_size", warnings),
        state=np.asarray(b_state, np.int16),
        stack=np.asarray(b_stack, np.int32),
        segment=np.asarray(b_seg, np.int32),
        state_names=state_names,
        fwd=np.asarray(b_fwd, np.int32),
    )
    return seg_table, block_table


def pool_kind(pool: PoolId) -> str:
    """``default``, ``graph`` or ``mempool``: which kind of pool torch's id names.

    torch numbers a pool it makes for a CUDA graph captured without ``pool=`` ``(N, 0)``,
    and one made by ``torch.cuda.MemPool()`` or ``graph_pool_handle()`` (which
    ``torch.compile``'s CUDA graphs share) ``(0, N)``; the default pool is ``(0, 0)``.
    """
    pool = tuple(pool)
    if pool == DEFAULT_POOL:
        return "default"
    if len(pool) == 2 and all(isinstance(v, int) for v in pool):
        if pool[1] == 0 and pool[0] > 0:
            return "graph"
        if pool[0] == 0 and pool[1] > 0:
            return "mempool"
    return "private"


def pool_name(pool: PoolId, short: bool = False) -> str:
    """How a pool is named in every view: ``default pool``, ``graph pool 1`` (a CUDA graph's
    own), ``mempool 2`` (MemPool / graph_pool_handle), else ``pool (a, b)``. ``short`` gives
    the map's two-character tag: '' for the default pool, ``g1``, ``m2``, ``p``."""
    pool = tuple(pool)
    kind = pool_kind(pool)
    if kind == "default":
        return "" if short else "default pool"
    if kind == "graph":
        return f"g{pool[0]}" if short else f"graph pool {pool[0]}"
    if kind == "mempool":
        return f"m{pool[1]}" if short else f"mempool {pool[1]}"
    return "p" if short else f"pool ({', '.join(map(str, pool))})"


def _pool_key(pool: object) -> PoolId:
    """A hashable pool id: torch writes a pair of ints; anything else (a huge int too) is shown as text."""
    items = tuple(pool) if isinstance(pool, (list, tuple)) else (pool,)
    return tuple(v if isinstance(v, int) and -(1 << 63) <= v < 1 << 64 else terminal_safe(text_of(v)) for v in items)


def _state_name(state: object) -> str:
    # State names are shown in the terminal and are dictionary keys: text, escaped.
    return terminal_safe(state) if isinstance(state, str) else text_of(state)


def _sortable(value: object) -> int:
    return value if isinstance(value, int) else 0
