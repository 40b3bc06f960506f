"""Where new segments land: the addresses cudaMalloc and the address-space reservations return.

The driver's choices are not the allocator's, but best fit breaks ties between blocks of
one size by address, so they matter. While the simulated allocator asks for exactly the
segments the recording did, in the same order, each gets the address the recording shows;
from the first difference on, new segments are placed below everything the recording used
(the driver hands out addresses downwards), reusing a freed range of the same size first.
"""

from __future__ import annotations

from bisect import bisect_left, insort

ALIGN = 2 << 20


class AddressSpace:
    def __init__(self, recorded: list[tuple[int, int]], lowest_used: int) -> None:
        self.recorded = recorded  # (address, size) of each recorded segment_alloc, in order
        self.next_recorded = 0
        self.in_step = True
        low = min([lowest_used] + [a for a, _ in recorded]) if recorded or lowest_used else 1 << 46
        self.floor = (low // ALIGN) * ALIGN - ALIGN * 512  # leave a gap below the recorded ranges
        self.freed: dict[int, list[int]] = {}
        self.live: list[int] = []  # starts of the ranges in use, sorted
        self.live_size: dict[int, int] = {}

    def malloc(self, size: int) -> int:
        if self.in_step and self.next_recorded < len(self.recorded):
            addr, recorded_size = self.recorded[self.next_recorded]
            if recorded_size == size and self._free_range(addr, size):
                self.next_recorded += 1
                return self._take(addr, size)
        self.in_step = False
        reuse = self.freed.get(size)
        while reuse:
            addr = reuse.pop()
            if self._free_range(addr, size):
                return self._take(addr, size)
        self.floor -= -(-size // ALIGN) * ALIGN
        return self._take(self.floor, size)

    def free(self, addr: int, size: int) -> None:
        if addr in self.live_size:
            del self.live_size[addr]
            del self.live[bisect_left(self.live, addr)]
        if addr <= self.floor or not self.in_step:
            bucket = self.freed.setdefault(size, [])
            bucket.append(addr)
            bucket.sort()

    def add_live(self, addr: int, size: int) -> None:
        """A segment that was there before the first event."""
        self._take(addr, size)

    def _take(self, addr: int, size: int) -> int:
        insort(self.live, addr)
        self.live_size[addr] = size
        return addr

    def _free_range(self, addr: int, size: int) -> bool:
        i = bisect_left(self.live, addr)
        if i < len(self.live) and self.live[i] < addr + size:
            return False
        return not (i > 0 and self.live[i - 1] + self.live_size[self.live[i - 1]] > addr)

    def reserve(self, size: int) -> int:
        """Address space for an expandable segment (never returned to the driver here)."""
        self.floor -= -(-size // ALIGN) * ALIGN
        return self._take(self.floor, size)
