"""The segment map's content, computed from an AllocatorState without textual.

A :class:`StateLayout` groups the state's blocks per segment once, then answers what each
row shows: a bar of cells scaled to the segment size (map mode) or one row per block and
free gap with exact figures (list mode).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.replay import AllocatorState

# Cell kinds in a segment bar, in increasing priority: a cell shows the strongest thing in it.
# MATCHED_CELL is a live block whose allocation has events the explorer's filter matches.
FREE_CELL, PENDING_CELL, ALLOCATED_CELL, MATCHED_CELL, SELECTED_CELL = 0, 1, 2, 3, 4
CELL_CHARS = {FREE_CELL: "░", PENDING_CELL: "▒", ALLOCATED_CELL: "█", MATCHED_CELL: "▇", SELECTED_CELL: "▓"}

SEGMENT_ROW, BLOCK_ROW, GAP_ROW = 0, 1, 2


@dataclass
class ListRow:
    kind: int  # SEGMENT_ROW, BLOCK_ROW or GAP_ROW
    segment: int
    block: int  # index into the state's blocks, NONE for segment and gap rows
    address: int
    size: int


class StateLayout:
    """Blocks per segment of one allocator state, and the figures the map shows."""

    def __init__(self, state: AllocatorState) -> None:
        self.state = state
        seg = state.blk_segment
        self._order = np.argsort(seg, kind="stable")
        sorted_seg = seg[self._order]
        n_seg = len(state.seg_addr)
        self._bounds = np.searchsorted(sorted_seg, np.arange(n_seg + 1), "left")
        self.max_segment = int(state.seg_size.max()) if n_seg else 0
        self._list_rows: list[ListRow] | None = None

    @property
    def n_segments(self) -> int:
        return len(self.state.seg_addr)

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
        start, size = int(self.state.seg_addr[s]), int(self.state.seg_size[s])
        cursor, largest, used = start, 0, 0
        for b in self.blocks_of(s):
            a, n = int(self.state.blk_addr[b]), int(self.state.blk_size[b])
            largest = max(largest, a - cursor)
            cursor = max(cursor, a + n)
            used += n
        return size - used, max(largest, start + size - cursor)

    def bar(self, s: int, cells: int, selected_block: int = NONE,
            matched_lives: np.ndarray | None = None) -> np.ndarray:
        """Kind of each of ``cells`` cells spanning segment ``s``.

        ``matched_lives`` (a flag per block life of the device) marks blocks a filter matched.
        """
        out = np.full(max(cells, 0), FREE_CELL, np.int8)
        if cells <= 0:
            return out
        start, size = int(self.state.seg_addr[s]), max(int(self.state.seg_size[s]), 1)
        for b in self.blocks_of(s):
            a, n = int(self.state.blk_addr[b]) - start, int(self.state.blk_size[b])
            lo = min(cells - 1, a * cells // size)
            hi = max(lo + 1, min(cells, -(-(a + n) * cells // size)))
            kind = SELECTED_CELL if b == selected_block else (
                MATCHED_CELL if self.is_matched(b, matched_lives) else
                ALLOCATED_CELL if self.state.blk_state[b] == ALLOCATED else PENDING_CELL)
            np.maximum(out[lo:hi], kind, out=out[lo:hi])
        return out

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
        for s in range(self.n_segments):
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
