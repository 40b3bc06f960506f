"""``annotate`` entries: labels attached to an allocation after the fact.

Newer torch records ``torch.cuda.memory._annotate_memory(ptr, metadata)`` as a trace
entry with action ``annotate``, the allocation's base address in ``addr`` and the label
in ``user_metadata`` (text, or a dict as compact JSON). A label belongs to the block live
at that address when it was recorded, and to no later allocation made at the address:
the label ends when the address is allocated again.

Which allocation that is follows from address_n: the annotation's version is the number
of lives at its address that ended before it. That life, if the trace has it and it had
started, is the one labelled; if the trace has no such life, the label is on the block
the snapshot lists at that address and version (allocated before the trace began: a
ghost block) when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import actions as act
from memtui.model import column_passes
from memtui.model.lifetimes import NONE, Lifetimes
from memtui.model.segments import ALLOCATED, PENDING_FREE, BlockTable


@dataclass
class Annotations:
    """One row per ``annotate`` entry of a device, in trace order."""

    event: np.ndarray  # trace index of the entry
    life: np.ndarray  # the block life it labels, or NONE
    block: np.ndarray  # the snapshot's block it labels (the life's, or a ghost block), or NONE
    version: np.ndarray  # the address_n version of what it labels, or NONE

    @classmethod
    def none(cls) -> Annotations:
        empty = np.zeros(0, np.int64)
        return cls(empty, empty.copy(), empty.copy(), empty.copy())

    def __len__(self) -> int:
        return len(self.event)

    def of_life(self, life: int, before: int | None = None) -> np.ndarray:
        """Trace indices of the annotations of a life (recorded at or before ``before``)."""
        mask = self.life == life
        if before is not None:
            mask &= self.event <= before
        found: np.ndarray = self.event[mask]
        return found

    def of_block(self, block: int, before: int | None = None) -> np.ndarray:
        """Trace indices of the annotations of one of the snapshot's blocks."""
        mask = self.block == block
        if before is not None:
            mask &= self.event <= before
        found: np.ndarray = self.event[mask]
        return found

    def row_of_event(self, i: int) -> int:
        pos = int(np.searchsorted(self.event, i))
        return pos if pos < len(self.event) and int(self.event[pos]) == i else NONE


def link_annotations(action: np.ndarray, addr: np.ndarray, lives: Lifetimes, blocks: BlockTable,
                     block_version: np.ndarray, block_life: np.ndarray) -> Annotations:
    """The allocation each ``annotate`` entry labels (module docstring)."""
    events = column_passes.positions(action, (act.ANNOTATE,))
    n = len(events)
    if not n:
        return Annotations.none()
    life = np.full(n, NONE, np.int64)
    block = np.full(n, NONE, np.int64)
    version = np.full(n, NONE, np.int64)
    final_of_life = {int(block_life[b]): b for b in np.flatnonzero(block_life != NONE)}
    active = (blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE)
    for k, i in enumerate(events.tolist()):
        a = addr[i]
        lo, hi = lives.address_range(a)
        ends = lives.end[lo:hi]
        v = int(np.count_nonzero((ends != NONE) & (ends < i)))
        found = lives.find(a, v) if hi > lo else NONE
        if found != NONE and lives.start[found] != NONE and lives.start[found] > i:
            found = NONE  # the address was free when the label was recorded
        if found != NONE:
            life[k], version[k] = found, v
            block[k] = final_of_life.get(int(found), NONE)
            continue
        ghost = np.flatnonzero(active & (blocks.address == a) & (block_life == NONE) & (block_version == v))
        if len(ghost) and (found == NONE and (hi == lo or v == lives.ends_at_address(a))):
            block[k], version[k] = int(ghost[0]), v
    return Annotations(events.astype(np.int64), life, block, version)
