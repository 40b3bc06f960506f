"""The allocator's blocks and pools, as c10/cuda/CUDACachingAllocator.cpp keeps them.

A segment is a chain of blocks (``prev``/``next``); a pool holds the free blocks, ordered
by (stream, size, address) as torch's ``BlockComparatorSize`` orders them, so best fit is
the first block at or after (stream, size, 0). Expandable segments also keep their
unmapped address space as blocks, ordered by (stream, address).
"""

from __future__ import annotations

from bisect import bisect_left, insort


class ExpandableSegment:
    """Reserved address space mapped page by page (2 MiB pages in the small pool, 20 MiB in the large)."""

    __slots__ = ("base", "page", "pages", "mapped")

    def __init__(self, base: int, page: int, pages: int) -> None:
        self.base, self.page, self.pages = base, page, pages
        self.mapped: set[int] = set()

    @property
    def size(self) -> int:
        return self.page * self.pages

    def page_range(self, addr: int, size: int, inward: bool) -> tuple[int, int]:
        """Pages [begin, end) of a byte range: covering it (map), or inside it (unmap)."""
        page, start, stop = self.page, addr - self.base, addr - self.base + size
        if inward:
            return -(-start // page), stop // page
        return start // page, -(-stop // page)


class Block:
    __slots__ = ("addr", "size", "stream", "pool", "allocated", "pending", "prev", "next", "mapped", "segment",
                 "requested", "gc_base", "slot")

    def __init__(self, addr: int, size: int, stream: int, pool: BlockPool, segment: ExpandableSegment | None = None):
        self.addr, self.size, self.stream, self.pool = addr, size, stream, pool
        self.allocated = False
        self.pending = False  # freed with uses on other streams not yet complete (event_count > 0)
        self.prev: Block | None = None
        self.next: Block | None = None
        self.mapped = True
        self.segment = segment
        self.requested = 0
        self.gc_base = 0
        self.slot = -1

    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None

    def splice(self, before: Block | None, after: Block | None) -> None:
        if before is not None:
            before.next = self
        self.prev = before
        if after is not None:
            after.prev = self
        self.next = after

    def allocatable(self) -> bool:
        return not self.allocated and not self.pending


class BlockPool:
    """Free blocks of one pool (small or large; the default pool or a private one)."""

    __slots__ = ("is_small", "private", "keys", "blocks", "unmapped_keys", "unmapped", "calls")

    def __init__(self, is_small: bool, private: tuple | None) -> None:
        self.is_small, self.private = is_small, private
        self.keys: list[tuple[int, int, int]] = []  # (stream, size, address), sorted
        self.blocks: dict[tuple[int, int, int], Block] = {}
        self.unmapped_keys: list[tuple[int, int]] = []  # (stream, address), sorted
        self.unmapped: dict[tuple[int, int], Block] = {}
        self.calls = 0  # get_free_block calls, the clock of garbage collection's block ages

    def insert(self, block: Block) -> None:
        block.gc_base = self.calls
        key = (block.stream, block.size, block.addr)
        insort(self.keys, key)
        self.blocks[key] = block

    def erase(self, block: Block) -> None:
        key = (block.stream, block.size, block.addr)
        del self.blocks[key]
        del self.keys[bisect_left(self.keys, key)]

    def insert_unmapped(self, block: Block) -> None:
        key = (block.stream, block.addr)
        insort(self.unmapped_keys, key)
        self.unmapped[key] = block

    def erase_unmapped(self, block: Block) -> None:
        key = (block.stream, block.addr)
        del self.unmapped[key]
        del self.unmapped_keys[bisect_left(self.unmapped_keys, key)]
