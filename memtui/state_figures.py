"""The figures every view prints about one allocator state, counted one way.

The summary, the segment map, the stack inspector and the OOM report all say how many
segments and blocks there are and how large the largest free block is. They take those
figures from here, so at one moment they agree, and each says what it counts:

* a **segment** is one reserved range: a ``cudaMalloc`` the allocator made, or one
  mapped range of an expandable segment;
* a **block** is an entry of the allocator's block list: an *allocated* block, a
  *pending free* one (freed by the program, still in use by another stream) or a *free*
  one (a maximal free run between them, which the snapshot calls ``inactive``).

Free memory is only of use to requests of its own pool: a request of at most 1 MiB is
served from the small pool (2 MiB segments), a larger one from the large pool, on the
same stream, never from a private pool (CUDA graphs). So a largest-free figure always
names its pool.

Pure: numpy and the model only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import DeviceModel
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE, pool_name
from memtui.model.strings import StringTable
from memtui.replay import AllocatorState
from memtui.units import format_bytes, plural

SMALL_REQUEST = 1 << 20  # requests up to 1 MiB come from the small pool
SMALL_SEGMENT = 2 << 20  # ...whose segments are exactly 2 MiB
DEFAULT_POOL = (0, 0)
POOLS = ("large", "small")


def request_pool(requested: int) -> str:
    """The pool (``"small"`` or ``"large"``) that serves a request of this size."""
    return "small" if requested <= SMALL_REQUEST else "large"


@dataclass(frozen=True)
class BlockCounts:
    """Segments and blocks of a state (or of one segment), by what the blocks hold."""

    segments: int
    allocated: int
    pending: int
    free: int

    @property
    def blocks(self) -> int:
        return self.allocated + self.pending + self.free

    def blocks_text(self, short: bool = False) -> str:
        """``20 blocks (18 allocated, 2 free)``; the pending ones only when there are some."""
        parts = [f"{self.allocated:,} {'alloc' if short else 'allocated'}"]
        if self.pending:
            parts.append(f"{self.pending:,} {'pend' if short else 'pending free'}")
        parts.append(f"{self.free:,} free")
        return f"{plural(self.blocks, 'block')} ({', '.join(parts)})"

    def text(self, short: bool = False) -> str:
        """``12 segments, 20 blocks (18 allocated, 2 free)``; ``short``: ``12 seg, 20 blocks (18 alloc, 2 free)``."""
        segments = f"{self.segments:,} seg" if short else plural(self.segments, "segment")
        return f"{segments}, {self.blocks_text(short)}"


def count_blocks(state: AllocatorState, segment: int | None = None) -> BlockCounts:
    """What :class:`BlockCounts` says, for the whole state or for one of its segments."""
    _, _, runs = state.free_runs_per_segment()
    if segment is None:
        states = state.blk_state
        return BlockCounts(len(state.seg_addr), int(np.count_nonzero(states == ALLOCATED)),
                           int(np.count_nonzero(states == PENDING_FREE)), int(runs.sum()))
    states = state.blk_state[state.blk_segment == segment]
    return BlockCounts(1, int(np.count_nonzero(states == ALLOCATED)),
                       int(np.count_nonzero(states == PENDING_FREE)), int(runs[segment]))


@dataclass(frozen=True)
class SegmentPools:
    """Which pool each segment of a state belongs to."""

    small: np.ndarray  # bool per segment: the small pool (else the large one)
    private: np.ndarray  # bool per segment: a private pool (CUDA graphs, MemPool), not the default one
    ids: tuple = ()  # per segment: torch's segment_pool_id, or None where the snapshot does not say

    def name(self, s: int) -> str:
        """``large``, ``small``, or for a private pool ``large, graph pool 1``."""
        size = "small" if self.small[s] else "large"
        if not self.private[s]:
            return size
        pool = self.pool_id(s)
        return f"{size}, {pool_name(pool)}" if pool is not None else f"{size} private"

    def pool_id(self, s: int) -> tuple | None:
        return self.ids[s] if s < len(self.ids) else None

    def pool_label(self, s: int) -> str:
        """The pool's own name (``default pool``, ``graph pool 1``, ``mempool 2``; ``pool
        unknown`` for a segment the snapshot no longer lists)."""
        pool = self.pool_id(s)
        return pool_name(pool) if pool is not None else "pool unknown"

    def short_tag(self, s: int) -> str:
        """Two characters for the map's label column: '' default, ``g1`` graph pool 1, ``m2``
        mempool 2, ``p`` another private pool, ``?`` unknown."""
        pool = self.pool_id(s)
        if pool is None:
            return "" if not self.private[s] else "p"
        return pool_name(pool, short=True)

    def usable(self, state: AllocatorState, pool: str, stream: int | None = None) -> np.ndarray:
        """Mask of the segments a request of ``pool`` (on ``stream``, if given) may take memory from."""
        same = self.small if pool == "small" else ~self.small
        mask = same & ~self.private
        if stream is not None:
            mask = mask & (state.seg_stream == stream)
        return mask


def segment_pools(state: AllocatorState, device: DeviceModel, strings: StringTable) -> SegmentPools:
    """Pools of ``state``'s segments: from the snapshot's segment table where the segment is
    in it, else guessed (a 2 MiB segment that is not expandable is a small-pool one)."""
    n = len(state.seg_addr)
    known = state.seg_final != NONE
    guessed_small = (state.seg_size == SMALL_SEGMENT) & ~state.seg_expandable.astype(bool)
    segs = device.segments
    if not len(segs) or not n:
        return SegmentPools(guessed_small.astype(bool), np.zeros(n, bool), (None,) * n)
    final = np.where(known, state.seg_final, 0).astype(np.int64)
    types = segs.segment_type.astype(np.int64)
    # Look each distinct type name up once, not once per segment.
    kinds, inverse = np.unique(types, return_inverse=True)
    small_type = np.array([strings[int(t)] == "small" for t in kinds], bool)[inverse.reshape(-1)]
    private_pool = np.array([tuple(p) != DEFAULT_POOL for p in segs.pools], bool)
    private_seg = private_pool[segs.pool.astype(np.int64)] if len(private_pool) else np.zeros(len(segs), bool)
    small = np.where(known, small_type[final], guessed_small)
    private = known & private_seg[final]
    ids = tuple(tuple(segs.pools[int(segs.pool[f])]) if k else None for f, k in zip(final.tolist(), known.tolist()))
    return SegmentPools(small.astype(bool), private.astype(bool), ids)


@dataclass(frozen=True)
class PoolFree:
    """Free memory of one pool (optionally on one stream) in a state."""

    pool: str
    stream: int | None
    segments: int  # segments in it
    free: int  # free bytes in them
    largest: int  # the largest free block (free run) in them
    where: int  # the segment holding that block, or NONE

    @property
    def label(self) -> str:
        """``large pool`` or ``large pool on stream 0``."""
        return f"{self.pool} pool" + (f" on stream {self.stream}" if self.stream is not None else "")

    def largest_text(self) -> str:
        """``largest free block in the large pool on stream 0: 0 B``"""
        return f"largest free block in the {self.label}: {format_bytes(self.largest)}"


def pool_free(state: AllocatorState, pools: SegmentPools, pool: str, stream: int | None = None) -> PoolFree:
    """Free bytes and the largest free block that a request of ``pool`` (and ``stream``) could use."""
    free, largest, _ = state.free_runs_per_segment()
    mask = pools.usable(state, pool, stream)
    if not mask.any():
        return PoolFree(pool, stream, 0, 0, 0, NONE)
    candidates = np.nonzero(mask)[0]
    best = int(candidates[int(np.argmax(largest[candidates]))])
    return PoolFree(pool, stream, len(candidates), int(free[mask].sum()), int(largest[best]), best)


def largest_free_text(state: AllocatorState, pools: SegmentPools, first: PoolFree | None = None) -> str:
    """Both pools' largest free blocks: ``large pool: 0 B · small pool: 831.00 KiB``.

    ``first`` (a request's pool and stream) leads, the other default pool follows.
    """
    figures = [first] if first is not None else []
    for pool in POOLS:
        if first is None or pool != first.pool:
            figures.append(pool_free(state, pools, pool))
    return " · ".join(f"{f.label}: {format_bytes(f.largest)}" for f in figures)
