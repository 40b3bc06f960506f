"""Consistency checks over a built model, for ``memtui check`` and the fuzz tests.

Findings are either *warnings* (the file contradicts itself or had values that had to be
replaced) or *notes* (legitimate but worth knowing, such as a trace that starts mid-run).
A check never raises on odd data: it reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import actions as act
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.model.snapshot import DeviceModel, Snapshot


@dataclass
class Finding:
    level: str  # "warning" or "note"
    device: int | None
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"level": self.level, "device": self.device, "message": self.message}


def check_snapshot(snapshot: Snapshot) -> list[Finding]:
    findings = [Finding("warning", None, w) for w in snapshot.warnings]
    if snapshot.strings.escaped:
        findings.append(Finding("warning", None, f"{snapshot.strings.escaped} strings held control or invalid "
                                                 "characters; they are shown escaped"))
    if snapshot.trace_overflowed:
        size = snapshot.trace_max_entries
        findings.append(Finding("note", None, "the trace's ring buffer" + (f" ({size:,} entries)" if size else "")
                                + " overflowed (trace_alloc_overflowed): every trace starts mid-run"))
    for dev in snapshot.devices:
        findings.extend(_check_device(dev))
        findings.extend(_skipped_actions(dev))
    return findings


def _skipped_actions(dev: DeviceModel) -> list[Finding]:
    """Notes for a trace recorded with ``skip_actions``: whole kinds of entry never appear.
    Legitimate, and read accordingly (model/snapshot.py block_end_codes, replay.py)."""
    action = dev.trace.action
    if not len(action):
        return []
    present = set(np.unique(action).tolist())
    blocks = present & {act.ALLOC, act.FREE_REQUESTED, act.FREE_COMPLETED}
    notes = []
    if blocks and act.FREE_REQUESTED not in present and act.FREE_COMPLETED in present:
        notes.append("no free_requested entries (skip_actions): an allocation ends at its free_completed")
    if act.FREE_REQUESTED in present and not present & set(act.BLOCK_END) and dev.lives.request.max(
            initial=NONE) == NONE:
        notes.append("no free_completed entries (skip_actions): an allocation ends at its free_requested")
    if blocks and not present & set(act.SEGMENT_ACTIONS):
        notes.append("no segment events (skip_actions, or none happened): segments are the snapshot's own; "
                     "memory outside them stands in segments inferred from its blocks")
    if blocks and act.ALLOC not in present:
        notes.append("no alloc entries (skip_actions): every allocation starts before the trace")
    return [Finding("note", dev.device, n) for n in notes]


def _check_device(dev: DeviceModel) -> list[Finding]:
    out: list[Finding] = []
    d = dev.device

    def warn(msg: str) -> None:
        out.append(Finding("warning", d, msg))

    def note(msg: str) -> None:
        out.append(Finding("note", d, msg))

    trace = dev.trace
    if len(trace):
        negative = int(np.count_nonzero(trace.size < 0))
        if negative:
            warn(f"{negative} trace entries have a negative size")
        times = trace.time_us
        missing = int(np.count_nonzero(~np.isfinite(times)))
        if missing:
            note(f"{missing} trace entries have no time")
        finite = times[np.isfinite(times)]
        backwards = int(np.count_nonzero(np.diff(finite) < 0))
        if backwards:
            warn(f"time goes backwards {backwards} times in the trace")
        lives = dev.lives
        orphan_frees = int(np.count_nonzero(lives.start == NONE))
        if orphan_frees and np.count_nonzero(trace.action == act.ALLOC):
            note(f"{orphan_frees} frees whose alloc is not in the trace (the trace starts mid-run: a wrapped "
                 "ring buffer or recording started late)")
        double_alloc = _events_per_life(dev, act.ALLOC)
        if double_alloc:
            warn(f"{double_alloc} addresses allocated twice without a free in between")

    blocks, segments = dev.blocks, dev.segments
    if len(blocks):
        if np.count_nonzero(blocks.size < 0):
            warn(f"{int(np.count_nonzero(blocks.size < 0))} blocks have a negative size")
        seg = blocks.segment
        start = segments.address[seg]
        end = start + segments.total_size[seg].astype(start.dtype) if start.dtype != object else None
        if end is not None:
            outside = (blocks.address < start) | (blocks.address + blocks.size.astype(start.dtype) > end)
            if np.count_nonzero(outside):
                warn(f"{int(np.count_nonzero(outside))} blocks lie outside their segment")
        order = np.lexsort((blocks.address, seg))
        a = blocks.address[order]
        same_seg = seg[order][1:] == seg[order][:-1]
        if np.count_nonzero(same_seg & (a[1:] == a[:-1])):
            warn("duplicate block addresses inside a segment")
        for s in range(len(segments)):
            lo, n = int(segments.block_start[s]), int(segments.block_count[s])
            states = blocks.state[lo:lo + n]
            allocated = int(blocks.size[lo:lo + n][states == ALLOCATED].sum())
            if n and allocated != int(segments.allocated_size[s]):
                warn(f"segment {int(segments.address[s]):#x}: allocated_size {int(segments.allocated_size[s])} "
                     f"but its allocated blocks add up to {allocated}")
    live_unlinked = int(np.count_nonzero(((blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE))
                                         & (dev.block_life == NONE)))
    if live_unlinked and len(trace):
        note(f"{live_unlinked} live blocks were {dev.alloc_not_in_trace()}")
    return out


def _events_per_life(dev: DeviceModel, code: int) -> int:
    """How many lives hold more than one event of ``code`` (e.g. two allocs)."""
    mask = dev.trace.action == code
    life = dev.lives.event_life[mask]
    life = life[life != NONE]
    if len(life) == 0:
        return 0
    return int(np.count_nonzero(np.bincount(life) > 1))
