"""Where the cursor goes for the jump keys: OOMs, same address, along one allocation's life.

Pure functions over the model returning event indices (or None when there is nowhere to
go), so the keys are testable without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import DeviceModel
from memtui.model import actions as act
from memtui.model.lifetimes import NONE, Lifetimes


@dataclass
class Jump:
    """A jump target, or the reason there is none."""

    event: int | None
    message: str = ""


def next_in(indices: np.ndarray, i: int, forward: bool, wrap: bool = True) -> tuple[int | None, bool]:
    """The first of the sorted ``indices`` after (or before) ``i``; (index, wrapped)."""
    if not len(indices):
        return None, False
    if forward:
        pos = int(np.searchsorted(indices, i, "right"))
        if pos < len(indices):
            return int(indices[pos]), False
        return (int(indices[0]), True) if wrap else (None, False)
    pos = int(np.searchsorted(indices, i, "left")) - 1
    if pos >= 0:
        return int(indices[pos]), False
    return (int(indices[-1]), True) if wrap else (None, False)


def going_round(wrapped: bool, target: int, i: int, at_end: bool = False) -> str:
    """What a jump's message adds when it went round the trace: " (wrapped)", or " (the only
    one)" when it came back to the event it left (a single match); nothing when it started
    from the end it went round (going round is then what was asked)."""
    if not wrapped:
        return ""
    if target == i:
        return " (the only one)"
    return "" if at_end else " (wrapped)"


def oom(device: DeviceModel, i: int, forward: bool) -> Jump:
    ooms = device.oom_indices()
    if not len(ooms):
        return Jump(None, "no OOM in this device's trace")
    target, wrapped = next_in(ooms, i, forward)
    which = f"OOM {int(np.searchsorted(ooms, target)) + 1} of {len(ooms)}"
    # Starting from either end of the trace, going round is what the user asked for.
    at_end = i >= len(device.trace) - 1 if forward else i <= 0
    return Jump(target, which + going_round(wrapped, target, i, at_end))


def same_address(device: DeviceModel, i: int, forward: bool) -> Jump:
    """Previous/next event touching the same address (allocations and segments alike)."""
    if not 0 <= i < len(device.trace):
        return Jump(None, "no event selected")
    action = int(device.trace.action[i])
    if action in (act.OOM, act.SNAPSHOT):
        return Jump(None, "this event has no address")
    addr = device.trace.addr[i]
    same = np.nonzero(device.trace.addr == addr)[0]
    target, _ = next_in(same, i, forward, wrap=False)
    if target is None:
        return Jump(None, f"no {'later' if forward else 'earlier'} event at {int(addr):x}")
    return Jump(target)


def along_life(device: DeviceModel, i: int, forward: bool) -> Jump:
    """Step through one allocation: alloc → free_requested → free_completed (and back).

    Segments step segment_alloc/map ↔ segment_free/unmap. A step that leaves the trace
    explains why (the alloc fell off the ring buffer, or the block was still live at the end).
    """
    if not 0 <= i < len(device.trace):
        return Jump(None, "no event selected")
    for lives in (device.lives, device.segment_lives):
        life = int(lives.event_life[i])
        if life != NONE:
            return _step_life(lives, life, i, forward, device.alloc_not_in_trace())
    return Jump(None, "this event is not part of an allocation")


def _step_life(lives: Lifetimes, life: int, i: int, forward: bool, alloc_missing: str) -> Jump:
    chain = [int(c[life]) for c in (lives.start, lives.request, lives.end)]
    present = sorted({c for c in chain if c != NONE})
    target, _ = next_in(np.asarray(present), i, forward, wrap=False)
    if target is not None:
        return Jump(target)
    if forward:
        if int(lives.end[life]) != NONE:
            return Jump(None, "this is the last event of this allocation")
        return Jump(None, "still live at snapshot time: no free in the trace")
    if int(lives.start[life]) != NONE:
        return Jump(None, "this is the allocation's first event")
    return Jump(None, f"{alloc_missing}: its alloc is not in the trace")
