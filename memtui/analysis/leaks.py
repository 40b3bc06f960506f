"""What grows: allocations live at snapshot time by call site, and how each site's live
memory moved over the run.

For every call site the live bytes and count are sampled once per step (or time
window, see :mod:`memtui.analysis.steps`). A site whose live bytes never fall between
samples and rise in at least half of the intervals is flagged as growing: memory that
each iteration adds and no iteration gives back, which is what a reference kept across
iterations (``loss_history.append(loss)``) looks like. One rise (optimizer state made
on the first step) is not growth.

The sampling is one pass over the lives: each life adds its bytes to the range of
sample points it spans (a difference array per site, then a cumulative sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.analysis.callsites import CallSites, group_by_site
from memtui.analysis.live import LifeSpans, life_spans
from memtui.analysis.steps import StepPoints, step_points
from memtui.model import DeviceModel, Snapshot
from memtui.model.segments import ALLOCATED

MIN_RISES = 2
RISING_SHARE = 0.5


@dataclass
class SiteGrowth:
    site: int
    label: str
    frames: list[dict]
    bytes: int  # live at snapshot time
    count: int
    series_bytes: list[int]  # live at each step point
    series_count: list[int]
    growing: bool
    units: int = 0  # steps (or windows) between the first and the last sample

    @property
    def growth_per_unit(self) -> int:
        return self.growth_bytes // self.units if self.units else 0

    @property
    def growth_bytes(self) -> int:
        return self.series_bytes[-1] - self.series_bytes[0] if self.series_bytes else 0

    @property
    def growth_count(self) -> int:
        return self.series_count[-1] - self.series_count[0] if self.series_count else 0

    def to_json(self) -> dict:
        return {"site": self.label, "frames": self.frames, "bytes": self.bytes, "count": self.count,
                "growing": self.growing, "growth_bytes": self.growth_bytes, "growth_count": self.growth_count,
                "growth_per_step": self.growth_per_unit,
                "series_bytes": self.series_bytes, "series_count": self.series_count}


@dataclass
class LeakReport:
    device: int
    points: StepPoints
    live_bytes: int
    live_count: int
    sites: list[SiteGrowth] = field(default_factory=list)

    @property
    def growing(self) -> list[SiteGrowth]:
        return [s for s in self.sites if s.growing]

    def to_json(self) -> dict:
        return {"device": self.device, "live_bytes": self.live_bytes, "live_count": self.live_count,
                "steps": self.points.to_json(), "growing": [s.label for s in self.growing],
                "sites": [s.to_json() for s in self.sites]}


def find_leaks(snapshot: Snapshot, dev: DeviceModel, depth: int = 1, max_points: int = 24,
               windows: int = 10, limit: int | None = 30) -> LeakReport:
    sites = CallSites(snapshot.stacks, depth)
    n_sites = len(sites)
    blocks = dev.blocks
    live = blocks.state == ALLOCATED
    end_bytes, end_count = group_by_site(sites.of_stacks(blocks.stack[live]), blocks.size[live], n_sites)

    points = step_points(snapshot, dev, max_points, windows)
    spans = life_spans(dev)
    series_bytes, series_count = sample_by_site(spans, sites.of_stacks(spans.stack), points.indices, n_sites)
    growing = growing_sites(series_bytes)

    # Growing sites first (by growth), then the rest by what they hold at the end.
    growth = series_bytes[:, -1] - series_bytes[:, 0] if len(points) else np.zeros(n_sites, np.int64)
    present = (end_count > 0) | growing
    order = np.lexsort((-end_bytes, -np.where(growing, growth, 0), ~growing))
    report = LeakReport(dev.device, points, int(end_bytes.sum()), int(end_count.sum()))
    for site in order:
        if not present[site] or (limit is not None and len(report.sites) >= limit and not growing[site]):
            continue
        report.sites.append(SiteGrowth(
            site=int(site), label=sites.label(int(site)), frames=sites.frame_dicts(int(site)),
            bytes=int(end_bytes[site]), count=int(end_count[site]),
            series_bytes=[int(v) for v in series_bytes[site]], series_count=[int(v) for v in series_count[site]],
            growing=bool(growing[site]), units=points.units_between_ends()))
    return report


def sample_by_site(spans: LifeSpans, site_of_life: np.ndarray, points: np.ndarray,
                   n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """Live bytes and counts of every site at every point: two (n_sites, len(points)) arrays."""
    k = len(points)
    if k == 0:
        empty = np.zeros((n_sites, 0), np.int64)
        return empty, empty
    first, last = spans.live_at(points)
    spanning = first < last
    site = site_of_life[spanning].astype(np.int64)
    first, last = first[spanning], last[spanning]
    size = spans.size[spanning].astype(np.float64)
    width = k + 1
    cells = n_sites * width
    up, down = site * width + first, site * width + last

    def accumulate(weights: np.ndarray | None) -> np.ndarray:
        diff = np.bincount(up, weights, cells) - np.bincount(down, weights, cells)
        return np.rint(np.cumsum(diff.reshape(n_sites, width), axis=1)[:, :k]).astype(np.int64)

    return accumulate(size), accumulate(None)


def growing_sites(series: np.ndarray) -> np.ndarray:
    """Mask of the rows that never fall and rise in at least half of the intervals."""
    if series.shape[1] < 3:
        return np.zeros(series.shape[0], bool)
    steps = np.diff(series, axis=1)
    rises = (steps > 0).sum(axis=1)
    falls = (steps < 0).sum(axis=1)
    needed = max(MIN_RISES, int(np.ceil(RISING_SHARE * steps.shape[1])))
    return (falls == 0) & (rises >= needed)
