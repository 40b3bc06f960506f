"""What the live view shows, computed without textual: top call sites now, the OOM's
explanation, ranks in order of how close each is to its limit, durations."""

from __future__ import annotations

import math

import numpy as np

from memtui.analysis.callsites import CallSites, top_sites
from memtui.analysis.oom import diagnose_ooms
from memtui.live.state import DeviceCounters
from memtui.model import Snapshot
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.report.oom import diagnosis_sections
from memtui.report.text import section_lines
from memtui.units import format_bytes


def live_call_sites(snapshot: Snapshot, device: int, limit: int = 8) -> list[dict]:
    """The call sites holding the most live bytes now (the snapshot's live blocks)."""
    dev = next((d for d in snapshot.devices if d.device == device), None)
    if dev is None:
        return []
    blocks = dev.blocks
    live = np.nonzero((blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE))[0]
    if not len(live):
        return []
    sites = CallSites(snapshot.stacks)
    return top_sites(sites, sites.of_stacks(dev.block_site_stack[live]), blocks.size[live], limit)


def oom_lines(snapshot: Snapshot, device: int) -> list[str]:
    """The last OOM's diagnosis on ``device``, as the `oom` command words it; [] if none."""
    found = diagnose_ooms(snapshot, device)
    if not found:
        return []
    lines: list[str] = []
    for section in diagnosis_sections(found[-1], len(found), len(found), largest_shown=3):
        lines += section_lines(section)
    return lines


def ooms_on(messages: list[dict], device: int) -> list[dict]:
    """The ``oom`` messages of ``device`` (one without a device is taken as the one shown)."""
    return [m for m in messages if m.get("device", device) == device]


def oom_headline(message: dict, limit: int | None = None) -> str:
    """What an ``oom`` message says the moment it arrives, before the diagnosis (which needs
    the state at the OOM indexed and replayed); ``limit``: what the allocator may reach (a
    per-process cap, say), from the counters, which the device's free memory does not show."""
    parts = [f"OUT OF MEMORY on device {message.get('device', '?')}"]
    if isinstance(message.get("requested"), int):
        parts.append(f"{format_bytes(message['requested'])} requested")
    if isinstance(message.get("device_allocated"), int):
        parts.append(f"{format_bytes(message['device_allocated'])} allocated")
    if isinstance(limit, int):
        parts.append(f"a limit of {format_bytes(limit)}")
    if isinstance(message.get("device_free"), int):
        parts.append(f"{format_bytes(message['device_free'])} free on the device")
    return ": ".join(parts[:1]) + (": " + ", ".join(parts[1:]) if parts[1:] else "") + " (explaining it...)"


def by_headroom(rows: list[tuple[object, DeviceCounters | None]]) -> list[tuple[object, DeviceCounters | None]]:
    """Ranks (any key, their counters) closest to their limit first: the largest share of the
    limit in use; ranks without a limit, then without counters, last."""
    def key(row):
        counters = row[1]
        if counters is None:
            return (2, 0.0)
        share = counters.used_share
        return (1, -counters.allocated) if math.isnan(share) else (0, -share)
    return sorted(rows, key=key)


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
