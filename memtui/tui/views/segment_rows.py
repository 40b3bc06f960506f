"""The segment map's content, computed from an AllocatorState without textual.

A :class:`StateLayout` groups the state's blocks per segment once, then answers what each
row shows: a bar of cells scaled to the segment size (map mode) or one row per block and
free gap with exact figures (list mode).

A bar cell covers a range of the segment's bytes. Its glyph says how much of that range
is in use: a full cell only when every byte is, a lower block (``▁``..``▅``, lower is
more free) when some bytes are free, however few (a 1 KiB hole in a cell of 40 MiB still
marks its cell), and ``░`` when none is used. Its colour says what is there (the
strongest thing in the cell: selected > filter match > pending free > allocated), and
neighbouring blocks alternate between two shades so each stays visible in a row of
them. The full glyph is seven eighths high, so rows of full segments stay apart in
terminals and browsers that draw block glyphs edge to edge.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.replay import AllocatorState

# Cell kinds in a segment bar, in increasing priority: a cell shows the strongest thing in it.
# Pending free outranks allocated: it is the rarer one, and memory about to come back.
# MATCHED_CELL is a live block whose allocation has events the explorer's filter matches.
# GHOST_CELL is an allocated block the trace never saw (allocated before recording began or
# its alloc fell off the ring buffer): drawn apart, between allocated and pending free.
FREE_CELL, ALLOCATED_CELL, PENDING_CELL, MATCHED_CELL, SELECTED_CELL, GHOST_CELL = 0, 1, 2, 3, 4, 5
KIND_NAMES = {FREE_CELL: "free", PENDING_CELL: "pending free", ALLOCATED_CELL: "allocated",
              MATCHED_CELL: "filter match", SELECTED_CELL: "selected block", GHOST_CELL: "ghost"}
_PRIORITY = (ALLOCATED_CELL, GHOST_CELL, PENDING_CELL, MATCHED_CELL, SELECTED_CELL)  # weakest first

# Fill levels of a cell: FREE_LEVEL (nothing in use) .. FULL_LEVEL (every byte in use).
FREE_LEVEL, FULL_LEVEL = 0, 6
PARTIAL_LEVELS = FULL_LEVEL - 1  # levels for a cell with both used and free bytes
LEVEL_CHARS = "░▁▂▃▄▅▇"
FREE_CHAR, FULL_CHAR = LEVEL_CHARS[FREE_LEVEL], LEVEL_CHARS[FULL_LEVEL]
# The legend, shared by the map's border and the help screen:
# (glyphs, cell kind whose colour they take or None, word, explanation).
LEGEND = [
    (FULL_CHAR, ALLOCATED_CELL, "allocated", "in use; neighbouring blocks alternate two shades"),
    (FULL_CHAR, PENDING_CELL, "pending free", "freed by the program, still in use by another stream"),
    (FULL_CHAR, GHOST_CELL, "ghost", "allocated, but no event of the trace is its allocation (allocated before "
                                     "recording began, or its alloc fell off the ring buffer)"),
    ("▁▃▅", None, "part free", "some bytes of the cell are free, however few: the lower, the more"),
    (FREE_CHAR, FREE_CELL, "free", "reserved by the allocator, not in use"),
    (FULL_CHAR, MATCHED_CELL, "filter match", "an allocation the filter (\\) matches"),
    (FULL_CHAR, SELECTED_CELL, "selected", "the block selected with ←/→ or a click"),
]


@dataclass
class BarCells:
    """One segment's bar: per cell, what is strongest there, how full it is, which shade."""

    kind: np.ndarray  # cell kind (FREE_CELL when nothing is in use)
    level: np.ndarray  # FREE_LEVEL..FULL_LEVEL
    alt: np.ndarray  # the cell's block is an odd one of its segment: the second shade

    def chars(self) -> str:
        return "".join(LEVEL_CHARS[int(v)] for v in self.level)

SEGMENT_ROW, BLOCK_ROW, GAP_ROW = 0, 1, 2


@dataclass
class ListRow:
    kind: int  # SEGMENT_ROW, BLOCK_ROW or GAP_ROW
    segment: int
    block: int  # index into the state's blocks, NONE for segment and gap rows
    address: int
    size: int


class StateLayout:
    """Blocks per segment of one allocator state, and the figures the map shows.

    ``pool_keys`` (a sortable key per segment: its pool) groups the rows by pool, the default
    pool first; ``ghost`` (a flag per block) marks blocks the trace never saw.
    """

    def __init__(self, state: AllocatorState, pool_keys: list | None = None, ghost: np.ndarray | None = None) -> None:
        self.state = state
        seg = state.blk_segment
        self._order = np.argsort(seg, kind="stable")
        sorted_seg = seg[self._order]
        n_seg = len(state.seg_addr)
        self._bounds = np.searchsorted(sorted_seg, np.arange(n_seg + 1), "left")
        self.max_segment = int(state.seg_size.max()) if n_seg else 0
        self._list_rows: list[ListRow] | None = None
        self._free, self._largest, self._runs = state.free_runs_per_segment()
        self.ghost = ghost
        self._records: tuple[np.ndarray | None, np.ndarray] | None = None  # see _block_records
        # Rows in pool order (stable: by address inside a pool); identity with one pool.
        if pool_keys is not None and len(set(pool_keys)) > 1:
            self.row_order = np.array(sorted(range(n_seg), key=lambda s: pool_keys[s]), np.int64)
        else:
            self.row_order = np.arange(n_seg, dtype=np.int64)
        self.row_of = np.empty(n_seg, np.int64)
        self.row_of[self.row_order] = np.arange(n_seg)

    @property
    def n_segments(self) -> int:
        return len(self.state.seg_addr)

    def segment_at_row(self, row: int) -> int:
        """The segment shown on map row ``row`` (rows are grouped by pool)."""
        return int(self.row_order[row])

    def blocks_of(self, s: int) -> np.ndarray:
        """Block indices inside segment ``s``, by address."""
        return self._order[self._bounds[s]:self._bounds[s + 1]]

    def segment_of_address(self, addr: int) -> int:
        seg_addr = self.state.seg_addr
        if not len(seg_addr):
            return NONE
        pos = int(np.searchsorted(seg_addr, addr, "right")) - 1
        if pos >= 0 and addr < int(seg_addr[pos]) + int(self.state.seg_size[pos]):
            return pos
        return NONE

    def block_at_address(self, addr: int) -> int:
        hits = np.nonzero(self.state.blk_addr == addr)[0]
        return int(hits[0]) if len(hits) else NONE

    def free_figures(self, s: int) -> tuple[int, int]:
        """(free bytes, largest free run) of segment ``s``."""
        return int(self._free[s]), int(self._largest[s])

    def bar_key(self, s: int, cells: int, selected_block: int = NONE,
                matched_lives: np.ndarray | None = None) -> bytes | None:
        """A value equal for two bars exactly when :meth:`cells` draws them alike (save a
        chance of 2**-128): the segment's place and size, the cells, and each of its blocks'
        address, size, state, ghost and filter flags, and which one is selected. None where
        addresses do not fit 64 bits (no key: the bar is drawn each time)."""
        st = self.state
        if st.blk_addr.dtype == object:
            return None
        records = self._block_records(matched_lives)
        lo, hi = int(self._bounds[s]), int(self._bounds[s + 1])
        blocks = self._order[lo:hi]
        selected = np.flatnonzero(blocks == selected_block) if selected_block != NONE else ()
        digest = hashlib.blake2b(records[lo:hi].tobytes(), digest_size=16)
        place = (int(st.seg_addr[s]), int(st.seg_size[s]), cells, int(selected[0]) if len(selected) else -1)
        digest.update(repr(place).encode())  # Python ints: an address may be past 2**63 (uint64)
        return digest.digest()

    def _block_records(self, matched_lives: np.ndarray | None) -> np.ndarray:
        """Per block in segment order: address, size, state and flags (ghost, filter match),
        made once per state and filter."""
        if self._records is not None and self._records[0] is matched_lives:
            return self._records[1]
        st, order = self.state, self._order
        flags = np.zeros(len(order), np.int64)
        if self.ghost is not None:
            flags |= self.ghost[order].astype(np.int64)
        if matched_lives is not None:
            flags |= self._matched(order, matched_lives).astype(np.int64) << 1
        records = np.stack([st.blk_addr[order].view(np.int64) if st.blk_addr.dtype == np.uint64
                            else st.blk_addr[order].astype(np.int64), st.blk_size[order].astype(np.int64),
                            st.blk_state[order].astype(np.int64), flags], axis=1)
        self._records = (matched_lives, records)
        return records

    def bar(self, s: int, cells: int, selected_block: int = NONE,
            matched_lives: np.ndarray | None = None) -> np.ndarray:
        """Kind of each of ``cells`` cells spanning segment ``s``."""
        return self.cells(s, cells, selected_block, matched_lives).kind

    def cells(self, s: int, cells: int, selected_block: int = NONE,
              matched_lives: np.ndarray | None = None) -> BarCells:
        """The ``cells`` cells spanning segment ``s``; see the module docstring.

        ``matched_lives`` (a flag per block life of the device) marks blocks a filter matched.
        Vectorised: a segment may hold many thousands of blocks.
        """
        cells = max(cells, 0)
        kind = np.full(cells, FREE_CELL, np.int8)
        level = np.full(cells, FREE_LEVEL, np.int8)
        alt = np.zeros(cells, bool)
        if cells == 0:
            return BarCells(kind, level, alt)
        st = self.state
        blocks = self.blocks_of(s)
        start, size = int(st.seg_addr[s]), max(int(st.seg_size[s]), 1)
        if st.blk_addr.dtype == st.seg_addr.dtype != object:
            # In the columns' own type (uint64 past 2**63), then signed: below the start is negative.
            offset = (st.blk_addr[blocks] - st.seg_addr[s]).astype(np.int64)
        else:
            offset = np.array([int(a) - start for a in st.blk_addr[blocks]], np.int64)
        lo = np.clip(offset, 0, size)
        hi = np.clip(offset + st.blk_size[blocks].astype(np.int64), lo, size)
        edges = np.array([c * size // cells for c in range(cells + 1)], np.int64)
        width = np.maximum(np.diff(edges), 1)
        used = np.minimum(np.maximum(np.diff(_used_before(lo, hi, edges)), 0), width)
        level[:] = np.where(used >= width, FULL_LEVEL, np.where(
            used <= 0, FREE_LEVEL, 1 + np.minimum(used * PARTIAL_LEVELS // width, PARTIAL_LEVELS - 1)))
        if not len(blocks):
            return BarCells(kind, level, alt)
        # The strongest kind over each cell a block touches.
        block_kind = np.where(st.blk_state[blocks] == ALLOCATED, ALLOCATED_CELL, PENDING_CELL).astype(np.int8)
        if self.ghost is not None:
            block_kind[self.ghost[blocks] & (block_kind == ALLOCATED_CELL)] = GHOST_CELL
        if matched_lives is not None:
            block_kind[self._matched(blocks, matched_lives)] = MATCHED_CELL
        block_kind[blocks == selected_block] = SELECTED_CELL
        first = np.minimum(lo * cells // size, cells - 1)
        last = np.maximum(first + 1, np.minimum(cells, -(-hi * cells // size)))
        for k in _PRIORITY:
            mine = block_kind == k
            if not mine.any():
                continue
            diff = np.zeros(cells + 1, np.int64)
            np.add.at(diff, first[mine], 1)
            np.add.at(diff, last[mine], -1)
            kind[np.cumsum(diff)[:cells] > 0] = k
        kind[level == FREE_LEVEL] = FREE_CELL
        # The shade of the block at each cell's middle: neighbours differ.
        middle = (edges[:-1] + edges[1:]) // 2
        ordinal = np.maximum(np.searchsorted(lo, middle, "right") - 1, 0)
        alt[:] = ordinal % 2 == 1
        return BarCells(kind, level, alt)

    def _matched(self, blocks: np.ndarray, matched_lives: np.ndarray) -> np.ndarray:
        """Per block of ``blocks``: whether its life is one a filter matched (a flag per life)."""
        life = self.state.blk_life[blocks]
        known = life != NONE
        hit = np.zeros(len(blocks), bool)
        hit[known] = matched_lives[life[known]]
        return hit

    def is_matched(self, b: int, matched_lives: np.ndarray | None) -> bool:
        if matched_lives is None:
            return False
        life = int(self.state.blk_life[b])
        return life != NONE and bool(matched_lives[life])

    def block_at_cell(self, s: int, cell: int, cells: int) -> int:
        """The block drawn in ``cell`` of segment ``s``'s bar (the largest there), or NONE."""
        start, size = int(self.state.seg_addr[s]), max(int(self.state.seg_size[s]), 1)
        lo, hi = start + cell * size // cells, start + (cell + 1) * size // cells
        best, best_size = NONE, -1
        for b in self.blocks_of(s):
            a, n = int(self.state.blk_addr[b]), int(self.state.blk_size[b])
            if a < hi and a + n > lo and n > best_size:
                best, best_size = int(b), n
        return best

    def list_rows(self) -> list[ListRow]:
        """Segments, each followed by its blocks and the free gaps between them."""
        if self._list_rows is not None:
            return self._list_rows
        st = self.state
        rows: list[ListRow] = []
        for s in self.row_order.tolist():
            start, size = int(st.seg_addr[s]), int(st.seg_size[s])
            rows.append(ListRow(SEGMENT_ROW, s, NONE, start, size))
            cursor = start
            for b in self.blocks_of(s):
                a, n = int(st.blk_addr[b]), int(st.blk_size[b])
                if a > cursor:
                    rows.append(ListRow(GAP_ROW, s, NONE, cursor, a - cursor))
                rows.append(ListRow(BLOCK_ROW, s, int(b), a, n))
                cursor = max(cursor, a + n)
            if start + size > cursor:
                rows.append(ListRow(GAP_ROW, s, NONE, cursor, start + size - cursor))
        self._list_rows = rows
        return rows


def state_name(code: int) -> str:
    return "allocated" if code == ALLOCATED else "pending free" if code == PENDING_FREE else "inactive"


def _used_before(lo: np.ndarray, hi: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Bytes in use below each of ``points`` (offsets), given blocks [lo, hi) sorted by ``lo``."""
    if not len(lo):
        return np.zeros(len(points), np.int64)
    length = hi - lo
    before = np.concatenate([[0], np.cumsum(length)])  # before[j]: bytes of blocks 0..j-1
    k = np.searchsorted(lo, points, "right")  # how many blocks start at or below each point
    last = np.maximum(k - 1, 0)
    partial = np.clip(points - lo[last], 0, length[last])
    return np.where(k > 0, before[last] + partial, 0)
