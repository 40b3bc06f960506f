"""Where new segments land: the addresses cudaMalloc and the address-space reservations return.

The driver's choices are not the allocator's, but best fit breaks ties between blocks of
one size by address, so they matter. While the simulated allocator asks for exactly the
segments the recording did, in the same order, each gets the address the recording shows;
from the first difference on, new segments are placed below everything the recording used
(the driver hands out addresses downwards), reusing a freed range of the same size first.
"""

from __future__ import annotations

ALIGN = 2 << 20


class AddressSpace:
    def __init__(self, recorded: list[tuple[int, int]], lowest_used: int) -> None:
        self.recorded = recorded  # (address, size) of each recorded segment_alloc, in order
        self.next_recorded = 0
        self.in_step = True
        low = min([lowest_used] + [a for a, _ in recorded]) if recorded or lowest_used else 1 << 46
        self.floor = (low // ALIGN) * ALIGN - ALIGN * 512  # leave a gap below the recorded ranges
        self.freed: dict[int, list[int]] = {}

    def malloc(self, size: int) -> int:
        if self.in_step and self.next_recorded < len(self.recorded):
            addr, recorded_size = self.recorded[self.next_recorded]
            if recorded_size == size:
                self.next_recorded += 1
                return addr
        self.in_step = False
        reuse = self.freed.get(size)
        if reuse:
            return reuse.pop()
        self.floor -= -(-size // ALIGN) * ALIGN
        return self.floor

    def free(self, addr: int, size: int) -> None:
        if addr <= self.floor or not self.in_step:
            bucket = self.freed.setdefault(size, [])
            bucket.append(addr)
            bucket.sort()

    def reserve(self, size: int) -> int:
        """Address space for an expandable segment (never returned to the driver here)."""
        self.floor -= -(-size // ALIGN) * ALIGN
        return self.floor
