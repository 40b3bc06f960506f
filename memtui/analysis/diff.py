"""What changed between two moments: live memory by call site, segments by pool.

A side of a diff is one device of one snapshot, either as the snapshot saw it at dump
time or replayed to an event. Call sites are matched by their text (``file:line
function``), so two files, two devices or two ranks compare as well as two moments of
one trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtui.analysis.callsites import CallSites, group_by_site
from memtui.model import DeviceModel, Snapshot
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PoolId, pool_name
from memtui.replay import Replayer

DEFAULT_POOL = (0, 0)


@dataclass
class PoolUsage:
    segments: int = 0
    reserved: int = 0
    allocated: int = 0


@dataclass
class MemoryView:
    """Live memory of one device at one moment, keyed by call-site text and pool name."""

    name: str
    device: int
    index: int | None  # the event replayed to, or None for the snapshot's own state
    reserved: int
    allocated: int
    sites: dict[str, tuple[int, int]]  # label -> (bytes, count)
    frames: dict[str, list[dict[str, Any]]]
    pools: dict[str, PoolUsage]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "index": self.index,
                "reserved": self.reserved, "allocated": self.allocated}


def view_at_end(snapshot: Snapshot, dev: DeviceModel, depth: int = 1) -> MemoryView:
    """The device as the snapshot recorded it at dump time."""
    sites = CallSites(snapshot.stacks, depth)
    blocks, segments = dev.blocks, dev.segments
    live = blocks.state == ALLOCATED
    pool_names = [_pool_name(snapshot.strings[int(t)], segments.pools[int(p)])
                  for t, p in zip(segments.segment_type, segments.pool)]
    pools: dict[str, PoolUsage] = {}
    for s, name in enumerate(pool_names):
        usage = pools.setdefault(name, PoolUsage())
        usage.segments += 1
        usage.reserved += int(segments.total_size[s])
    for b in np.nonzero(live)[0]:
        pools[pool_names[int(blocks.segment[b])]].allocated += int(blocks.size[b])
    return _view(f"{snapshot.name} device {dev.device}", dev.device, None, sites,
                 sites.of_stacks(dev.block_site_stack[live]), blocks.size[live], pools)


def view_at_event(snapshot: Snapshot, dev: DeviceModel, index: int, depth: int = 1,
                  replayer: Replayer | None = None, moment: str = "") -> MemoryView:
    """The device replayed to just after event ``index``; ``moment``: what the user named it
    by (``oom``, ``step 3``), said beside the event's number."""
    sites = CallSites(snapshot.stacks, depth)
    state = (replayer or Replayer(dev)).state_at(index)
    allocated = state.blk_state == ALLOCATED
    stacks = _state_stacks(dev, state.blk_life, state.blk_final)
    segments = dev.segments
    pools: dict[str, PoolUsage] = {}
    seg_names = []
    for s in range(len(state.seg_addr)):
        final = int(state.seg_final[s])
        if final != NONE:
            name = _pool_name(snapshot.strings[int(segments.segment_type[final])],
                              segments.pools[int(segments.pool[final])])
        else:
            name = "small" if int(state.seg_size[s]) == 2 << 20 else "large"
        seg_names.append(name)
        usage = pools.setdefault(name, PoolUsage())
        usage.segments += 1
        usage.reserved += int(state.seg_size[s])
    for b in np.nonzero(allocated & (state.blk_segment != NONE))[0]:
        pools[seg_names[int(state.blk_segment[b])]].allocated += int(state.blk_size[b])
    at = f"@ event {dev.shown_index(state.index)}" if state.index >= 0 else "before its first event"
    if moment and state.index >= 0:
        at = f"@ {moment} (event {dev.shown_index(state.index)})"
    return _view(f"{snapshot.name} device {dev.device} {at}", dev.device, state.index, sites,
                 sites.of_stacks(stacks[allocated]), state.blk_size[allocated], pools)


def _view(name: str, device: int, index: int | None, sites: CallSites, site_ids: np.ndarray,
          sizes: np.ndarray, pools: dict[str, PoolUsage]) -> MemoryView:
    total, count = group_by_site(site_ids, sizes, len(sites))
    by_label: dict[str, tuple[int, int]] = {}
    frames: dict[str, list[dict[str, Any]]] = {}
    for site in np.nonzero(count)[0]:
        label = sites.label(int(site))
        old = by_label.get(label, (0, 0))
        by_label[label] = (old[0] + int(total[site]), old[1] + int(count[site]))
        frames[label] = sites.frame_dicts(int(site))
    return MemoryView(name, device, index, sum(p.reserved for p in pools.values()), int(total.sum()),
                      by_label, frames, pools)


def _pool_name(segment_type: str, pool: PoolId) -> str:
    kind = segment_type or "large"
    return kind if tuple(pool) == DEFAULT_POOL else f"{kind} {pool_name(pool)}"


def _state_stacks(dev: DeviceModel, blk_life: np.ndarray, blk_final: np.ndarray) -> np.ndarray:
    stacks = np.full(len(blk_life), -1, np.int64)
    traced = blk_life != NONE
    if traced.any():
        start = dev.lives.start[blk_life[traced]]
        got = np.where(start != NONE, dev.site_stack[np.maximum(start, 0)], -1) if len(dev.trace) else \
            np.full(len(start), -1)
        stacks[traced] = got
    fill = (stacks < 0) & (blk_final != NONE)
    stacks[fill] = dev.block_site_stack[blk_final[fill]]
    return stacks


@dataclass
class SiteChange:
    site: str
    frames: list[dict[str, Any]]
    bytes_a: int
    bytes_b: int
    count_a: int
    count_b: int

    @property
    def delta_bytes(self) -> int:
        return self.bytes_b - self.bytes_a

    @property
    def delta_count(self) -> int:
        return self.count_b - self.count_a

    @property
    def status(self) -> str:
        if self.count_a == 0:
            return "new"
        if self.count_b == 0:
            return "gone"
        return "changed" if self.delta_bytes or self.delta_count else "same"

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "frames": self.frames, "status": self.status,
                "bytes_a": self.bytes_a, "bytes_b": self.bytes_b, "delta_bytes": self.delta_bytes,
                "count_a": self.count_a, "count_b": self.count_b, "delta_count": self.delta_count}


@dataclass
class PoolChange:
    pool: str
    a: PoolUsage
    b: PoolUsage

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "segments_a": self.a.segments, "segments_b": self.b.segments,
                "reserved_a": self.a.reserved, "reserved_b": self.b.reserved,
                "delta_reserved": self.b.reserved - self.a.reserved,
                "allocated_a": self.a.allocated, "allocated_b": self.b.allocated,
                "delta_allocated": self.b.allocated - self.a.allocated}


@dataclass
class MemoryDiff:
    a: MemoryView
    b: MemoryView
    sites: list[SiteChange] = field(default_factory=list)
    pools: list[PoolChange] = field(default_factory=list)

    @property
    def new(self) -> list[SiteChange]:
        return [s for s in self.sites if s.status == "new"]

    @property
    def gone(self) -> list[SiteChange]:
        return [s for s in self.sites if s.status == "gone"]

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a.describe(), "b": self.b.describe(),
                "delta_reserved": self.b.reserved - self.a.reserved,
                "delta_allocated": self.b.allocated - self.a.allocated,
                "pools": [p.to_json() for p in self.pools],
                "new": [s.site for s in self.new], "gone": [s.site for s in self.gone],
                "sites": [s.to_json() for s in self.sites]}


def diff_views(a: MemoryView, b: MemoryView) -> MemoryDiff:
    """Changes from ``a`` to ``b``, the largest growth first and the largest shrink last."""
    labels = set(a.sites) | set(b.sites)
    changes = []
    for label in labels:
        bytes_a, count_a = a.sites.get(label, (0, 0))
        bytes_b, count_b = b.sites.get(label, (0, 0))
        frames = b.frames.get(label) or a.frames.get(label) or []
        changes.append(SiteChange(label, frames, bytes_a, bytes_b, count_a, count_b))
    changes.sort(key=lambda c: (-c.delta_bytes, -c.bytes_b, c.site))
    pools = [PoolChange(name, a.pools.get(name, PoolUsage()), b.pools.get(name, PoolUsage()))
             for name in sorted(set(a.pools) | set(b.pools))]
    return MemoryDiff(a, b, changes, pools)
