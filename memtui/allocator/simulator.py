"""A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp).

It follows torch's ``DeviceCachingAllocator`` step by step: ``malloc`` rounds the request
(``round_size``), picks the small or large pool (or a private pool), looks for the best
fitting cached block on the request's stream (``get_free_block``, with the
``max_split_size``/``max_non_split_rounding_size`` rules for oversize blocks), else runs the
garbage collector (``garbage_collection_threshold`` under a per-process cap) and asks the
device for a segment (``alloc_block``: 2 MiB, 20 MiB, or the request rounded to 2 MiB; with
expandable segments, pages mapped into a reserved range); when the device refuses, it frees
oversize cached blocks and retries (``release_available_cached_blocks``), then frees every
unsplit cached block and retries (``release_cached_blocks``), and only then reports an OOM.
A found block is split when ``should_split`` says so. ``free`` returns a block to its pool,
merged with free neighbours, at once or, when it was used on other streams, when that use
completes. ``empty_cache`` is ``release_cached_blocks``.

The device is a limit on reserved bytes: a per-process cap (``set_per_process_memory_fraction``,
checked before asking, which also arms the garbage collector) or what the device had free.

Every segment event the real allocator would write to its trace is written to ``events``
as (action code, address, size), so a replay under the recorded settings can be checked
against the recording.
"""

from __future__ import annotations

from bisect import bisect_left

from memtui.allocator.addresses import AddressSpace
from memtui.allocator.blocks import Block, BlockPool, ExpandableSegment
from memtui.allocator.settings import K_LARGE_BUFFER, NO_LIMIT, AllocatorSettings

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20
# More than any device holds (the largest hold a few hundred GiB): a request above it is
# refused, and the reserved bytes never exceed it. A trace can claim sizes up to 2^64;
# keeping every size and sum of sizes far below 2^63 keeps the compiled replay's int64
# arithmetic exact (src/memtui_native/allocator.c), so it answers as this model does.
MAX_DEVICE_BYTES = 1 << 44

# Segment event codes, as memtui.model.actions numbers them.
SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP = 3, 4, 5, 6


def round_size(size: int, settings: AllocatorSettings) -> int:
    """The block size a request gets (torch's round_size and roundup_power2_next_division)."""
    if size < K_MIN_BLOCK:
        return K_MIN_BLOCK
    divisions = settings.divisions_for(size)
    if divisions > 1 and size > K_MIN_BLOCK * divisions:
        if size & (size - 1) == 0:
            return size
        floor = 1 << (size.bit_length() - 1)
        step = floor >> (divisions.bit_length() - 1)
        if step == 0:
            return floor << 1
        rounded = size & ~(step - 1)
        return size if rounded == size else rounded + step
    return -(-size // K_MIN_BLOCK) * K_MIN_BLOCK


def allocation_size(size: int) -> int:
    """The segment a request that found no cached block asks the device for."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


class Simulator:
    """One device's caching allocator."""

    def __init__(self, settings: AllocatorSettings, addresses: AddressSpace, *, limit: int | None = None,
                 per_process: bool = False, device_total: int | None = None, hints_per_process: bool = False) -> None:
        self.settings = settings
        # How a per-request limit (malloc's device_limit) refuses: as a per-process cap does,
        # checking the whole segment's size before asking, or as the device does, page by page.
        self.hints_per_process = hints_per_process
        self.addresses = addresses
        self.limit = limit  # bytes this process may reserve; None: unlimited
        self.per_process = per_process and limit is not None  # a set_per_process_memory_fraction cap
        self.va_size = ((device_total or 96 << 30) * 9) // 8  # torch reserves 1 1/8 of device memory
        self.pools: dict[tuple, BlockPool] = {}
        self.pending: dict[int, Block] = {}  # id -> block freed with uses on other streams
        self.segments: dict[int, Block] = {}  # address -> first block of each cudaMalloc segment
        self.expandable: list[tuple[ExpandableSegment, BlockPool, int]] = []
        self.freeable_private: list[tuple] = []  # in the order empty_cache first freed them
        self.events: list[tuple[int, int, int]] = []
        self.reserved = 0
        self.allocated = 0
        self.active = 0
        self.retries = 0

    # -- pools -----------------------------------------------------------------------------
    def pool(self, small: bool, private: tuple | None) -> BlockPool:
        key = (private, small)
        found = self.pools.get(key)
        if found is None:
            found = self.pools[key] = BlockPool(small, private)
        return found

    # -- malloc ----------------------------------------------------------------------------
    def malloc(self, orig_size: int, stream: int, private: tuple | None = None,
               device_limit: int | None = None) -> Block | None:
        """Serve a request, or None when torch would raise OutOfMemoryError.

        ``device_limit`` overrides the device's limit for this one request (a replay of the
        recording knows where the real device refused).
        """
        if orig_size > MAX_DEVICE_BYTES:
            return None  # no device serves it (and rounding it would leave int64 in the compiled loop)
        size = round_size(orig_size, self.settings)
        pool = self.pool(size <= K_SMALL_SIZE, private)
        alloc_size = allocation_size(size)
        block = self._free_block(pool, stream, size)
        if block is None:
            cap = self.limit if self.per_process else None
            limit = None if self.per_process else self.limit
            if device_limit is not None:
                if self.hints_per_process:
                    cap = device_limit
                else:
                    limit = device_limit
            if self.per_process and self.settings.garbage_collection_threshold > 0:
                self._garbage_collect()
            block = self._alloc_block(pool, stream, size, alloc_size, cap, limit)
            if block is None and self._release_available(pool, stream, size):
                block = self._alloc_block(pool, stream, size, alloc_size, cap, limit)
            if block is None and private is None:  # torch skips this while a graph is being captured
                self.release_cached()
                self.retries += 1
                block = self._alloc_block(pool, stream, size, alloc_size, cap, limit)
            if block is None:
                return None
        return self._use_block(block, pool, stream, size, orig_size)

    def _free_block(self, pool: BlockPool, stream: int, size: int) -> Block | None:
        settings = self.settings
        if self.per_process and settings.garbage_collection_threshold > 0:
            pool.calls += 1
        keys = pool.keys
        i = bisect_left(keys, (stream, size, 0))
        if i == len(keys) or keys[i][0] != stream:
            return None
        block = pool.blocks[keys[i]]
        if block.segment is not None:
            if settings.expandable_segments:
                # Best fit counts an expandable block as big as it can grow.
                while block.segment is not None and i + 1 < len(keys) and keys[i + 1][0] == stream:
                    nxt = pool.blocks[keys[i + 1]]
                    if _expandable_size(nxt) >= _expandable_size(block):
                        break
                    i, block = i + 1, nxt
            else:
                i += 1
                while i < len(keys) and keys[i][0] == stream and pool.blocks[keys[i]].segment is not None:
                    i += 1
                if i == len(keys) or keys[i][0] != stream:
                    return None
                block = pool.blocks[keys[i]]
        split_limit = settings.max_split_size
        if size < split_limit <= block.size:
            return None  # an oversize block is never handed to a smaller request
        if size >= split_limit and block.size >= size + settings.max_non_split_rounding_size:
            return None
        pool.erase(block)
        return block

    def _use_block(self, block: Block, pool: BlockPool, stream: int, size: int, orig_size: int) -> Block:
        if self._should_split(block, pool, size):
            remaining = block
            block = Block(remaining.addr, size, stream, pool, remaining.segment)
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.addr += size
            remaining.size -= size
            pool.insert(remaining)
            if remaining.prev is block and self.segments.get(block.addr) is remaining:
                self.segments[block.addr] = block
        block.allocated = True
        block.requested = orig_size
        self.allocated += block.size
        self.active += block.size
        return block

    def _should_split(self, block: Block, pool: BlockPool, size: int) -> bool:
        remaining = block.size - size
        if pool.is_small or self.settings.expandable_segments:
            return remaining >= K_MIN_BLOCK
        return size < self.settings.max_split_size and remaining > K_SMALL_SIZE

    # -- asking the device -------------------------------------------------------------------
    def _alloc_block(self, pool: BlockPool, stream: int, size: int, alloc_size: int, cap: int | None,
                     limit: int | None) -> Block | None:
        if cap is not None and self.reserved + alloc_size > cap:
            return None
        if self.reserved + alloc_size > MAX_DEVICE_BYTES:
            return None
        if self.settings.expandable_segments:
            return self._alloc_expandable(pool, stream, size, limit)
        if limit is not None and self.reserved + alloc_size > limit:
            return None
        addr = self.addresses.malloc(alloc_size)
        block = Block(addr, alloc_size, stream, pool)
        self.reserved += alloc_size
        self.segments[addr] = block
        self.events.append((SEGMENT_ALLOC, addr, alloc_size))
        return block

    def _alloc_expandable(self, pool: BlockPool, stream: int, size: int, limit: int | None) -> Block | None:
        candidate = self._find_expandable(pool, stream, size)
        if not candidate.mapped and not self._map(candidate, min(candidate.size, size), limit):
            return None
        while candidate.size < size:
            nxt = candidate.next
            if nxt is None:
                return None  # larger than the whole reserved range: no segment can hold it
            if not self._map(nxt, min(size - candidate.size, nxt.size), limit):
                return None
            candidate = nxt
        pool.erase(candidate)
        return candidate

    def _find_expandable(self, pool: BlockPool, stream: int, size: int) -> Block:
        keys = pool.unmapped_keys
        i = bisect_left(keys, (stream, 0))
        while i < len(keys) and keys[i][0] == stream:
            c = pool.unmapped[keys[i]]
            if c.prev is not None and c.prev.allocatable():
                c = c.prev
            room, b = 0, c
            while room < size and b is not None and b.allocatable():
                room += b.size
                b = b.next
            if room >= size:
                return c
            i += 1
        page = K_SMALL_BUFFER if pool.is_small else K_LARGE_BUFFER
        pages = -(-self.va_size // page)
        segment = ExpandableSegment(self.addresses.reserve(pages * page), page, pages)
        self.expandable.append((segment, pool, stream))
        candidate = Block(segment.base, segment.size, stream, pool, segment)
        candidate.mapped = False
        pool.insert_unmapped(candidate)
        return candidate

    def _map(self, block: Block, size: int, limit: int | None) -> bool:
        segment = block.segment
        begin, end = segment.page_range(block.addr, size, inward=False)
        mapped = (end - begin) * segment.page
        if mapped == 0 or (limit is not None and self.reserved + mapped > limit) \
                or self.reserved + mapped > MAX_DEVICE_BYTES:
            return False
        segment.mapped.update(range(begin, end))
        pool = block.pool
        pool.erase_unmapped(block)
        block.mapped = True
        if mapped < block.size:
            rest = Block(block.addr + mapped, block.size - mapped, block.stream, pool, segment)
            rest.mapped = False
            rest.splice(block, block.next)
            pool.insert_unmapped(rest)
            block.size = mapped
        addr = block.addr
        _merge(block, block.prev, pool)
        _merge(block, block.next, pool)
        pool.insert(block)
        self.reserved += mapped
        self.events.append((SEGMENT_MAP, addr, mapped))
        return True

    # -- free ------------------------------------------------------------------------------
    def free(self, block: Block, pending: bool = False) -> None:
        """A tensor's memory is released (free_requested); ``pending``: it was used on other
        streams, so the block is reusable only at :meth:`complete` (free_completed)."""
        block.allocated = False
        self.allocated -= block.size
        if pending:
            block.pending = True
            self.pending[id(block)] = block
        else:
            self._return(block)

    def complete(self, block: Block) -> None:
        """The other streams' uses of a freed block are done (free_completed)."""
        if self.pending.pop(id(block), None) is not None:
            self._return(block)

    def _return(self, block: Block) -> None:
        block.pending = False
        size = block.size
        pool = block.pool
        _merge(block, block.prev, pool)
        _merge(block, block.next, pool)
        if block.prev is None and block.segment is None:
            self.segments[block.addr] = block
        pool.insert(block)
        self.active -= size

    # -- giving memory back -----------------------------------------------------------------
    def _release_available(self, pool: BlockPool, stream: int, size: int) -> bool:
        """Free oversize cached blocks, just enough for the request (max_split_size set)."""
        limit = self.settings.max_split_size
        if limit == NO_LIMIT:
            return False
        key_size = max(size, limit)
        keys = pool.keys
        i = bisect_left(keys, (stream, key_size, 0))
        if i < len(keys) and keys[i][0] == stream:
            return self._release_segment(pool.blocks[keys[i]])
        if i == 0:
            return False
        released = 0
        i -= 1
        while released < key_size and i >= 0 and keys[i][0] == stream:
            block = pool.blocks[keys[i]]
            if block.size < limit:
                break
            if self._release_segment(block):
                released += block.size
            i -= 1
        return released >= key_size

    def release_cached(self) -> None:
        """torch's release_cached_blocks: wait for pending frees, then give back every cached
        block that is a whole segment (and the free pages of expandable segments)."""
        for block in list(self.pending.values()):
            self.complete(block)
        for key in ((None, False), (None, True)):
            if key in self.pools:
                self._release_pool(self.pools[key])
        for private in self.freeable_private:
            for small in (True, False):
                if (private, small) in self.pools:
                    self._release_pool(self.pools[(private, small)])

    def empty_cache(self, freeable: tuple = ()) -> None:
        """torch.cuda.empty_cache(); ``freeable``: private pools no graph uses any more."""
        self.freeable_private += [p for p in freeable if p not in self.freeable_private]
        self.release_cached()

    def _release_pool(self, pool: BlockPool) -> None:
        to_unmap = []
        for key in list(pool.keys):
            block = pool.blocks.get(key)
            if block is None:
                continue
            if block.segment is not None:
                to_unmap.append(block)
            elif block.prev is None and block.next is None:
                self._release_segment(block)
        for block in to_unmap:
            self._unmap(block)
            if block.prev is None and block.next is None and not block.mapped:
                pool.erase_unmapped(block)
                self.expandable = [e for e in self.expandable if e[0] is not block.segment]

    def _release_segment(self, block: Block) -> bool:
        if block.segment is not None or block.is_split():
            return False
        self.events.append((SEGMENT_FREE, block.addr, block.size))
        self.reserved -= block.size
        block.pool.erase(block)
        self.segments.pop(block.addr, None)
        self.addresses.free(block.addr, block.size)
        return True

    def _unmap(self, block: Block) -> None:
        segment = block.segment
        begin, end = segment.page_range(block.addr, block.size, inward=True)
        if begin >= end:
            return
        pool = block.pool
        pool.erase(block)
        start = segment.base + begin * segment.page
        size = (end - begin) * segment.page
        before = start - block.addr
        if before > 0:
            head = Block(block.addr, before, block.stream, pool, segment)
            head.splice(block.prev, block)
            pool.insert(head)
        after = block.size - before - size
        if after > 0:
            tail = Block(start + size, after, block.stream, pool, segment)
            tail.splice(block, block.next)
            pool.insert(tail)
        block.addr, block.size, block.mapped = start, size, False
        segment.mapped.difference_update(range(begin, end))
        _merge(block, block.prev, pool)
        _merge(block, block.next, pool)
        pool.insert_unmapped(block)
        self.reserved -= size
        self.events.append((SEGMENT_UNMAP, start, size))

    def _garbage_collect(self) -> None:
        """garbage_collect_cached_blocks: above threshold x cap, free the unsplit cached
        blocks of the large pool that waited longest since last use."""
        threshold = int(self.settings.garbage_collection_threshold * self.limit)
        if self.reserved <= threshold:
            return
        target = self.reserved - threshold
        pool = self.pools.get((None, False))
        if pool is None:
            return
        ages = [pool.calls - b.gc_base for b in pool.blocks.values() if not b.is_split() and b.segment is None]
        count, total_age = len(ages), sum(ages)
        reclaimed, freed = 0, True
        while reclaimed < target and freed and count > 0:
            threshold_age = total_age / count
            freed = False
            for key in list(pool.keys):
                block = pool.blocks.get(key)
                if block is None or block.is_split() or block.segment is not None:
                    continue
                age = pool.calls - block.gc_base
                if age >= threshold_age:
                    freed = True
                    reclaimed += block.size
                    total_age -= age
                    count -= 1
                    self._release_segment(block)


def _expandable_size(block: Block) -> int:
    nxt = block.next
    return block.size + (nxt.size if nxt is not None and not nxt.mapped else 0)


def _merge(dst: Block, src: Block | None, pool: BlockPool) -> int:
    """try_merge_blocks: fold a free neighbour ``src`` into ``dst``."""
    if src is None or src.allocated or src.pending or dst.mapped != src.mapped:
        return 0
    if src.mapped:
        pool.erase(src)
    else:
        pool.erase_unmapped(src)
    if dst.prev is src:
        dst.addr = src.addr
        dst.prev = src.prev
        if dst.prev is not None:
            dst.prev.next = dst
    else:
        dst.next = src.next
        if dst.next is not None:
            dst.next.prev = dst
    dst.size += src.size
    return src.size
