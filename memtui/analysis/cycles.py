"""The reference-cycle sawtooth: memory that only the garbage collector gives back.

Tensors held by Python reference cycles are not freed when the program drops them but
when the cyclic garbage collector runs. In a trace that looks like this: allocations
from the same lines pile up over many iterations, then many of them are freed back to
back, with no allocation in between (the collector freeing one object after another).

A **burst** is a run of at least ``MIN_BURST`` frees with no allocation between them.
Ordinary code frees in runs too (dropping a list of temporaries, ``zero_grad``), but
what it frees was made in one go. A burst is suspicious when, for one call site, the
lives it frees were made in at least ``MIN_ROUNDS`` separate rounds: different
iterations when step annotations mark them, else separate executions of the line
(runs of allocations from that site with allocations from other sites in between, at
most two lives per run on average).

Suspicious bursts that repeat with about the same size make a **bounded** sawtooth:
the collector keeps up, at the price of the peak each tooth adds. A single burst (or
teeth that keep growing) is **unbounded**: the memory came back only at the end, or an
OOM struck while it waited.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.analysis.callsites import CallSites
from memtui.analysis.live import allocated_curve, life_spans
from memtui.analysis.steps import step_boundaries
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act

MIN_BURST = 8  # lives freed back to back
MIN_SITE_LIVES = 4  # of them from one call site
MIN_ROUNDS = 4  # made in this many separate rounds
MAX_LIVES_PER_EXECUTION = 2  # without step annotations, on average per execution of the line
BOUNDED_SPREAD = 1.5  # teeth within this factor of the median tooth are "the same size"
SUGGESTION = ("find the cycles with torch.utils.viz._cycles.warn_tensor_cycles(), or break them "
              "(weakref, del, or clearing the attribute that closes the loop)")


@dataclass
class Burst:
    index: int  # first free of the burst
    end_index: int  # last free of the burst
    time_us: float
    lives: int  # lives of suspicious sites freed in the burst
    bytes: int
    allocated_before: int  # allocated memory right before the burst: the tooth's peak
    allocated_after: int
    rounds: int
    order: str  # how the free order relates to the allocation order
    sites: list[str]
    collected_at: str  # where the program was when the frees happened

    def to_json(self) -> dict:
        return {"index": self.index, "end_index": self.end_index,
                "time_us": self.time_us if np.isfinite(self.time_us) else None,
                "lives": self.lives, "bytes": self.bytes, "allocated_before": self.allocated_before,
                "allocated_after": self.allocated_after, "rounds": self.rounds, "order": self.order,
                "sites": self.sites, "collected_at": self.collected_at}


@dataclass
class CycleSite:
    site: str
    frames: list[dict]
    bursts: int
    lives: int
    bytes: int  # freed by bursts in total
    largest_burst_bytes: int
    rounds: int  # the most rounds seen in one burst

    def to_json(self) -> dict:
        return {"site": self.site, "frames": self.frames, "bursts": self.bursts, "lives": self.lives,
                "bytes": self.bytes, "largest_burst_bytes": self.largest_burst_bytes, "rounds": self.rounds}


@dataclass
class CycleReport:
    device: int
    rounds_by: str  # "steps" or "executions"
    sites: list[CycleSite] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)
    bounded: bool = False
    ooms_while_accumulating: list[dict] = field(default_factory=list)
    trace_start_us: float = float("nan")  # time of the first event, for times relative to it

    def seconds_into_trace(self, burst: Burst) -> float:
        return (burst.time_us - self.trace_start_us) / 1e6

    @property
    def suspected(self) -> bool:
        return bool(self.bursts)

    @property
    def pattern(self) -> str | None:
        if not self.suspected:
            return None
        return "bounded" if self.bounded else "unbounded"

    def to_json(self) -> dict:
        return {"cycles_suspected": self.suspected, "pattern": self.pattern, "bounded": self.bounded,
                "device": self.device, "rounds_by": self.rounds_by,
                "sites": [s.to_json() for s in self.sites], "bursts": [b.to_json() for b in self.bursts],
                "ooms_while_accumulating": self.ooms_while_accumulating,
                "suggestion": SUGGESTION if self.suspected else None}


def find_cycles(snapshot: Snapshot, dev: DeviceModel, depth: int = 1) -> CycleReport:
    trace = dev.trace
    n = len(trace)
    sites = CallSites(snapshot.stacks, depth)
    spans = life_spans(dev)
    n_lives = len(dev.lives)  # the spans past these are untraced blocks, never freed
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    life_site = sites.of_stacks(spans.stack[:n_lives]).astype(np.int64)
    steps = step_boundaries(snapshot, dev)
    report = CycleReport(dev.device, "steps" if steps is not None else "executions")
    times = trace.time_us[np.isfinite(trace.time_us)]
    report.trace_start_us = float(times.min()) if len(times) else float("nan")
    if n == 0 or n_lives == 0:
        return report

    is_alloc = trace.action == act.ALLOC
    allocs_before = np.cumsum(is_alloc)  # frees with equal counts have no alloc between them
    freed = np.nonzero((stop < n) & (start >= 0))[0]
    freed = freed[np.argsort(stop[freed], kind="stable")]
    group = allocs_before[stop[freed]]
    groups, group_sizes = np.unique(group, return_counts=True)
    big = groups[group_sizes >= MIN_BURST]
    members = freed[np.isin(group, big)]
    if len(members) == 0:
        return report
    member_group = np.searchsorted(big, allocs_before[stop[members]])

    rounds_of = _rounds(trace.action, is_alloc, life_site, start, steps)
    key = member_group * len(sites) + life_site[members]
    keys, key_lives = np.unique(key, return_counts=True)
    rounds = _distinct_per_key(key, rounds_of[start[members]], keys)
    enough = (key_lives >= MIN_SITE_LIVES) & (rounds >= MIN_ROUNDS)
    if steps is None:
        # Executions are weaker evidence than steps: a backward pass interleaves the same
        # lines with other work many times in one iteration. A line that leaks into a
        # cycle once per iteration makes one or two lives per execution, not a handful.
        enough &= rounds * MAX_LIVES_PER_EXECUTION >= key_lives
    suspicious_keys = keys[enough]
    if len(suspicious_keys) == 0:
        return report
    suspicious = np.isin(key, suspicious_keys)
    members, member_group, key = members[suspicious], member_group[suspicious], key[suspicious]
    key_rounds = dict(zip(keys.tolist(), rounds.tolist()))

    curve = allocated_curve(dev, spans)
    size = spans.size[:n_lives]
    for g in np.unique(member_group):
        lives = members[member_group == g]
        first, last = int(stop[lives].min()), int(stop[lives].max())
        site_ids = np.unique(life_site[lives])
        report.bursts.append(Burst(
            index=first, end_index=last, time_us=float(trace.time_us[first]), lives=len(lives),
            bytes=int(size[lives].sum()),
            allocated_before=int(curve[first - 1]) if first > 0 else int(curve[first] + size[lives].sum()),
            allocated_after=int(curve[last]),
            rounds=max(key_rounds[int(g) * len(sites) + int(s)] for s in site_ids),
            order=_order(start[lives], stop[lives]),
            sites=[sites.label(int(s)) for s in site_ids],
            collected_at=sites.label(sites.of_stack(int(trace.stack[first]))),
        ))
    report.sites = _site_totals(sites, life_site, size, members, member_group, key, key_rounds)
    report.bounded = _bounded(report.bursts)
    report.ooms_while_accumulating = _ooms_while_waiting(dev, start, stop, size, members)
    return report


def _rounds(action: np.ndarray, is_alloc: np.ndarray, life_site: np.ndarray, start: np.ndarray,
            steps: tuple[str, np.ndarray] | None) -> np.ndarray:
    """For every event, the round an allocation made there belongs to."""
    n = len(action)
    if steps is not None:
        return np.searchsorted(steps[1], np.arange(n), "left")
    site_at = np.full(n, -1, np.int64)
    traced = start >= 0
    site_at[start[traced]] = life_site[traced]
    alloc_sites = site_at[is_alloc]
    new_run = np.ones(len(alloc_sites), bool)
    new_run[1:] = alloc_sites[1:] != alloc_sites[:-1]
    run = np.full(n, -1, np.int64)
    run[is_alloc] = np.cumsum(new_run) - 1
    return run


def _distinct_per_key(key: np.ndarray, value: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """How many distinct ``value``s each of ``keys`` (sorted, from ``key``) has."""
    order = np.lexsort((value, key))
    k, v = key[order], value[order]
    new = np.ones(len(k), bool)
    new[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    return np.bincount(np.searchsorted(keys, k[new]), minlength=len(keys))


def _order(alloc_at: np.ndarray, freed_at: np.ndarray) -> str:
    """Whether a burst freed in allocation order, in reverse, or neither."""
    if len(alloc_at) < 3:
        return "mixed"
    a = np.argsort(np.argsort(alloc_at, kind="stable"))
    f = np.argsort(np.argsort(freed_at, kind="stable"))
    rho = np.corrcoef(a, f)[0, 1]
    if not np.isfinite(rho):
        return "mixed"
    return "allocation order" if rho > 0.9 else "reverse order" if rho < -0.9 else "mixed"


def _site_totals(sites: CallSites, life_site: np.ndarray, size: np.ndarray, members: np.ndarray,
                 member_group: np.ndarray, key: np.ndarray, key_rounds: dict) -> list[CycleSite]:
    out = []
    for s in np.unique(life_site[members]):
        mine = life_site[members] == s
        groups = member_group[mine]
        per_burst = np.bincount(np.unique(groups, return_inverse=True)[1], weights=size[members[mine]])
        out.append(CycleSite(
            site=sites.label(int(s)), frames=sites.frame_dicts(int(s)), bursts=len(np.unique(groups)),
            lives=int(mine.sum()), bytes=int(size[members[mine]].sum()),
            largest_burst_bytes=int(per_burst.max()),
            rounds=max(key_rounds[int(k)] for k in np.unique(key[mine]))))
    out.sort(key=lambda c: -c.bytes)
    return out


def _bounded(bursts: list[Burst]) -> bool:
    """Repeated teeth of about the same height: the collector keeps the growth in check."""
    if len(bursts) < 2:
        return False
    held = np.array([b.bytes for b in bursts], np.float64)
    return bool(held.max() <= BOUNDED_SPREAD * np.median(held))


def _ooms_while_waiting(dev: DeviceModel, start: np.ndarray, stop: np.ndarray, size: np.ndarray,
                        members: np.ndarray) -> list[dict]:
    out = []
    for i in dev.oom_indices():
        waiting = members[(start[members] <= i) & (stop[members] > i)]
        if len(waiting):
            out.append({"index": int(i), "lives": len(waiting), "bytes": int(size[waiting].sum())})
    return out
