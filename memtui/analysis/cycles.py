"""The reference-cycle sawtooth: memory that only the garbage collector gives back.

Tensors held by Python reference cycles are not freed when the program drops them but
when the cyclic garbage collector runs. In a trace: allocations from the same lines pile
up, then many are freed back to back. Ordinary code frees in runs too (a list or dict
going out of scope, ``zero_grad``, an exception's traceback let go), so a run of frees
is only a candidate: :mod:`memtui.analysis.bursts` finds them and weighs, for each call
site in each, what the snapshot shows about why it was freed (the C++ frames of the
frees when recorded, else the Python line against where the memory was made, which lives
the burst left alive, whether it followed an OOM).

The report's verdict is ``cycles``, ``no cycles`` or ``cannot tell``, with a confidence
(``high``: frames say it; ``medium``: Python stacks and lifetimes agree; ``low``), the
evidence, and the other explanations weighed. ``cycles_suspected`` is true only for a
``cycles`` verdict of high or medium confidence, and null (None) when the verdict is
``cannot tell``. What the trace shows (its bursts and their causes, its steps, whether
there is a trace at all) is read by :mod:`memtui.analysis.trace_evidence`, the one
reading ``oom`` and ``leaks`` share.

Collector bursts that repeat with about the same size (within ``BOUNDED_SPREAD`` of the
median) make a **bounded** sawtooth: the collector keeps up, at the price of the peak
each tooth adds. A single burst (or teeth that keep growing) is **unbounded**: the memory
came back only at the end, or an OOM struck while it waited.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtui.analysis import bursts as bu
from memtui.analysis import evidence as ev
from memtui.analysis.callsites import CallSites
from memtui.analysis.live import LifeSpans, allocated_curve
from memtui.analysis.trace_evidence import TraceEvidence, trace_evidence
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.trace import TraceColumns
from memtui.units import format_bytes, plural

MIN_BURST = bu.MIN_BURST
MIN_SITE_LIVES = bu.MIN_SITE_LIVES
BOUNDED_SPREAD = 1.5  # teeth within this factor of the median tooth are "the same size"
# Bursts nothing explains decide the verdict ("cannot tell") once they free this share of
# the peak allocated memory; smaller ones are listed as a caveat.
UNEXPLAINED_SHARE = 0.1
SUGGESTION = ("find the cycles with torch.utils.viz._cycles.warn_tensor_cycles(), or break them "
              "(weakref, del, or clearing the attribute that closes the loop)")
CYCLES, NO_CYCLES, CANNOT_TELL = "cycles", "no cycles", "cannot tell"


@dataclass
class Burst:
    index: int  # first free of the burst
    end_index: int  # last free of the burst
    time_us: float
    lives: int  # lives of the burst's explained sites
    bytes: int
    allocated_before: int  # allocated memory right before the burst: the tooth's peak
    allocated_after: int
    rounds: int
    order: str  # how the free order relates to the allocation order
    sites: list[str]
    collected_at: str  # where the program was when the frees happened
    cause: str = bu.CYCLE  # a key of bursts.CAUSE_WORDS
    confidence: str = "high"
    evidence: list[ev.Evidence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "end_index": self.end_index,
                "time_us": self.time_us if np.isfinite(self.time_us) else None,
                "lives": self.lives, "bytes": self.bytes, "allocated_before": self.allocated_before,
                "allocated_after": self.allocated_after, "rounds": self.rounds, "order": self.order,
                "sites": self.sites, "collected_at": self.collected_at, "cause": self.cause,
                "confidence": self.confidence, "evidence": [e.to_json() for e in self.evidence]}


@dataclass
class CycleSite:
    site: str
    frames: list[dict[str, Any]]
    bursts: int
    lives: int
    bytes: int  # freed by bursts in total
    largest_burst_bytes: int
    rounds: int  # the most rounds seen in one burst

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "frames": self.frames, "bursts": self.bursts, "lives": self.lives,
                "bytes": self.bytes, "largest_burst_bytes": self.largest_burst_bytes, "rounds": self.rounds}


@dataclass
class CycleReport:
    device: int
    rounds_by: str  # "steps" (annotations) or "iterations" (returns to the loop's statement, steps.py)
    sites: list[CycleSite] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)  # what the collector freed
    other_bursts: list[Burst] = field(default_factory=list)  # bursts with another cause, or none known
    bounded: bool = False
    ooms_while_accumulating: list[dict[str, Any]] = field(default_factory=list)
    trace_start_us: float = float("nan")  # time of the first event, for times relative to it
    verdict: str = NO_CYCLES
    confidence: str = "medium"
    stacks: str = "none"  # what the frees carry: "all" (C++ frames too), "python", or "none"
    evidence: list[ev.Evidence] = field(default_factory=list)
    alternatives: list[dict[str, Any]] = field(default_factory=list)

    def seconds_into_trace(self, burst: Burst) -> float:
        return (burst.time_us - self.trace_start_us) / 1e6

    @property
    def suspected(self) -> bool | None:
        """True for cycles found, False for none, None when the file cannot tell."""
        if self.verdict == CANNOT_TELL:
            return None
        return self.verdict == CYCLES and self.confidence in ("high", "medium")

    @property
    def pattern(self) -> str | None:
        if not self.suspected:
            return None
        return "bounded" if self.bounded else "unbounded"

    def to_json(self) -> dict[str, Any]:
        return {"cycles_suspected": self.suspected, "verdict": self.verdict, "confidence": self.confidence,
                "pattern": self.pattern, "bounded": self.bounded, "device": self.device, "stacks": self.stacks,
                "evidence": [e.to_json() for e in self.evidence], "alternatives": self.alternatives,
                "rounds_by": self.rounds_by, "sites": [s.to_json() for s in self.sites],
                "bursts": [b.to_json() for b in self.bursts],
                "other_bursts": [b.to_json() for b in self.other_bursts],
                "ooms_while_accumulating": self.ooms_while_accumulating,
                "suggestion": SUGGESTION if self.suspected else None}


def find_cycles(snapshot: Snapshot, dev: DeviceModel, depth: int = 1, seen: TraceEvidence | None = None) -> CycleReport:
    """``seen``: the device's trace evidence at ``depth`` when the caller has read it already."""
    seen = seen if seen is not None else trace_evidence(snapshot, dev, depth)
    trace = dev.trace
    n = len(trace)
    sites, spans, life_site, steps = seen.sites, seen.spans, seen.life_site, seen.steps
    n_lives = len(dev.lives)  # the spans past these are untraced blocks, never freed
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    report = CycleReport(dev.device, "steps" if steps is not None else "iterations")
    span = dev.time_span
    report.trace_start_us = span[0] if span else float("nan")
    report.stacks = seen.stacks
    if not seen.traced:
        report.verdict, report.confidence = CANNOT_TELL, "low"
        report.evidence.append(ev.Evidence(seen.no_trace_reason or "", CANNOT_TELL))
        report.alternatives.append({"verdict": "reference cycles", "why": "not excluded: nothing recorded tells"})
        report.alternatives.append({"verdict": NO_CYCLES, "why": "not excluded: nothing recorded tells"})
        return report
    if n == 0 or n_lives == 0:
        _no_bursts(report, [])
        return report

    found = seen.bursts
    curve = allocated_curve(dev, spans)
    size = spans.size[:n_lives]
    cycle_groups: list[tuple[int, bu.SiteGroup]] = []
    for k, b in enumerate(found):
        mine = [g for g in b.groups if g.cause == bu.CYCLE]
        cycle_groups += [(k, g) for g in mine]
        groups = mine or b.groups
        if not groups:
            continue
        lives = np.concatenate([g.lives for g in groups])
        first, last = int(stop[lives].min()), int(stop[lives].max())
        best = max(groups, key=lambda g: g.bytes)
        burst = Burst(
            index=first, end_index=last, time_us=float(trace.time_us[first]), lives=len(lives),
            bytes=int(size[lives].sum()),
            allocated_before=int(curve[first - 1]) if first > 0 else int(curve[first] + size[lives].sum()),
            allocated_after=int(curve[last]),
            rounds=max(g.rounds for g in groups),
            order=_order(start[lives], stop[lives]),
            sites=[sites.label(g.site) for g in groups],
            collected_at=_freed_most_at(trace, sites, stop[lives], size[lives]),
            cause=best.cause, confidence=_weakest(g.confidence for g in groups if g.cause == best.cause),
            evidence=_unique(e for g in groups for e in g.evidence))
        (report.bursts if mine else report.other_bursts).append(burst)
    if cycle_groups:
        report.sites = _site_totals(sites, size, cycle_groups)
        report.bounded = _bounded(report.bursts)
        report.ooms_while_accumulating = _ooms_while_waiting(dev, spans, life_site, cycle_groups)
    peak = int(curve.max()) if len(curve) else 0
    frees = int(np.count_nonzero(np.isin(trace.action, (act.FREE_COMPLETED, act.FREE))))
    scattered = _scattered_frees(snapshot, seen, n)
    _decide(report, found, cycle_groups, _oom_piles(dev, spans, life_site, sites, found), peak, frees, scattered)
    if not seen.free_stacks and report.verdict == NO_CYCLES:
        # The collector freeing a few tensors at a time makes no burst; only the frees' own
        # stacks could show it, and these carry their allocations'.
        report.verdict, report.confidence = CANNOT_TELL, "low"
        report.evidence.insert(0, ev.Evidence("every free in the trace carries its allocation's stack (recorded with"
                                              " context='alloc'): where and why memory was freed is not recorded, so"
                                              " a collector freeing a few tensors at a time cannot be ruled out",
                                              CANNOT_TELL))
        report.alternatives = [{"verdict": "reference cycles", "why": "not excluded: nothing recorded tells"}]
    return report


def _freed_most_at(trace: TraceColumns, sites: CallSites, freed_at: np.ndarray, sizes: np.ndarray) -> str:
    """Where the program was when the burst freed: the line whose frees let go of the most
    bytes (the first free's line can be a stray one freed on the way)."""
    where = sites.of_stacks(trace.stack[freed_at]).astype(np.int64)
    ids, inverse = np.unique(where, return_inverse=True)
    return sites.label(int(ids[np.argmax(np.bincount(inverse, weights=sizes.astype(np.float64)))]))


def _weakest(confidences: Iterable[str]) -> str:
    out = "high"
    for c in confidences:
        out = ev.lower_confidence(out, c)
    return out


def _unique(items: Iterable[ev.Evidence]) -> list[ev.Evidence]:
    """Evidence once per observation: texts that differ only in their figures are one."""
    seen: set[str] = set()
    out: list[ev.Evidence] = []
    for item in items:
        key = re.sub(r"[\d.,]+", "#", item.text)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _scattered_frees(snapshot: Snapshot, seen: TraceEvidence, n: int) -> dict[str, Any]:
    """Frees outside any burst that speak of the collector: with C++ frames, those whose
    stack shows it (it frees a small cycle's two or three tensors too, never a burst);
    with Python frames only, those of lives made in an earlier iteration and freed at
    another line of the function that made them or in unrelated code: a small cycle
    collected, or a del or container trimmed there, which Python stacks cannot tell apart."""
    spans = seen.spans
    n_lives = len(seen.freed_by)
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    lives = np.flatnonzero((start >= 0) & (stop < n) & (seen.freed_by < 0))
    out = {"collector_bytes": 0, "collector_event": -1, "late_bytes": 0, "late_event": -1}
    if not len(lives):
        return out
    free_sid = snapshot.devices[seen.device].trace.stack[stop[lives]].astype(np.int64)
    size = spans.size[lives].astype(np.int64)
    if seen.stacks == "all":
        by_collector = seen.releases.of_stacks(free_sid) == ev.RELEASES.index(ev.COLLECTOR)
        if by_collector.any():
            out["collector_bytes"] = int(size[by_collector].sum())
            out["collector_event"] = int(stop[lives[by_collector]].min())
        return out
    rounds = seen.rounds
    later = rounds[np.minimum(stop[lives], n - 1)] > rounds[start[lives]]
    lives, free_sid, size = lives[later], free_sid[later], size[later]
    if not len(lives):
        return out
    # One relation per distinct (free stack, alloc stack) pair, not per life.
    alloc_sid = spans.stack[lives].astype(np.int64)
    width = len(snapshot.stacks) + 1
    pair = (free_sid + 1) * width + (alloc_sid + 1)
    keys, inverse = np.unique(pair, return_inverse=True)
    suspect = np.array([ev.python_relation(ev.python_frames(snapshot.stacks, int(k // width) - 1),
                                           ev.python_frames(snapshot.stacks, int(k % width) - 1))[0]
                        in (ev.SAME_FUNCTION, ev.ELSEWHERE) for k in keys], bool)
    mine = suspect[inverse]
    if mine.any():
        out["late_bytes"] = int(size[mine].sum())
        out["late_event"] = int(stop[lives[mine]].min())
    return out


def _decide(report: CycleReport, found: list[bu.FreeBurst], cycle_groups: list[tuple[int, bu.SiteGroup]],
            piles: list[dict[str, Any]], peak: int, frees: int, scattered: dict[str, Any]) -> None:
    """The verdict, its confidence, the evidence and the alternatives weighed."""
    e, alt = report.evidence, report.alternatives
    # A burst is split into groups, one per call site; each group has a cause. A count the
    # report gives is of bursts (what its tables and the JSON list): for a cause, the bursts
    # holding a group of it.
    by_cause: dict[str, list[bu.SiteGroup]] = {}
    bursts_of: dict[str, set[int]] = {}
    for k, b in enumerate(found):
        for g in b.groups:
            by_cause.setdefault(g.cause, []).append(g)
            bursts_of.setdefault(g.cause, set()).add(k)
    others = {c: gs for c, gs in by_cause.items() if c not in (bu.CYCLE, bu.UNKNOWN)}
    unknown = by_cause.get(bu.UNKNOWN, [])
    unknown_bytes = sum(g.bytes for g in unknown)
    if cycle_groups:
        gs = [g for _, g in cycle_groups]
        report.verdict = CYCLES
        report.confidence = "high" if any(g.confidence == "high" for g in gs) else "medium"
        e.append(ev.Evidence(f"{plural(len({k for k, _ in cycle_groups}), 'burst')} freed"
                             f" {format_bytes(sum(g.bytes for g in gs))} that had piled up at"
                             f" {plural(len({g.site for g in gs}), 'call site')}", CYCLES, report.bursts[0].index))
        e += _unique(x for g in gs if g.confidence == report.confidence for x in g.evidence)[:4]
        if report.ooms_while_accumulating:
            o = report.ooms_while_accumulating[0]
            e.append(ev.Evidence(f"an OOM at event {o['index']:,} struck while {format_bytes(o['bytes'])} from those"
                                 " sites was live" + (", which the collector freed later" if o["collected_later"]
                                                      else ", waiting for the collector as before"),
                                 CYCLES, o["index"]))
        alt.append({"verdict": "reference counting (a list, dict or scope dropping them)",
                    "why": "rejected: the collector's frames are on the frees' stacks" if report.confidence == "high"
                    else "not excluded: Python stacks cannot show the collector, and a container cleared on a"
                         " schedule frees the same way (record with stacks='all' to be sure)"})
    elif scattered["collector_bytes"]:
        report.verdict, report.confidence = CYCLES, "high"
        e.append(ev.Evidence(f"{format_bytes(scattered['collector_bytes'])} was freed outside any burst by frees"
                             " whose C++ stacks show the cycle collector: small cycles, collected a few tensors"
                             " at a time", CYCLES, scattered["collector_event"]))
        alt.append({"verdict": "reference counting (a list, dict or scope dropping them)",
                    "why": "rejected: the collector's frames are on those frees' stacks"})
    else:
        unexplained = [p for p in piles if p["freed_by"] in ("never", bu.UNKNOWN)]
        if unexplained:
            p = unexplained[0]
            report.verdict, report.confidence = CANNOT_TELL, "low"
            how = ("and was never freed in the trace" if p["freed_by"] == "never"
                   else "and was freed in a burst nothing recorded explains")
            e.append(ev.Evidence(f"{format_bytes(p['bytes'])} in {plural(p['lives'], 'allocation')} from {p['site']}"
                                 f" piled up until the OOM at event {p['index']:,} {how}: held by a reference (a"
                                 " leak) or by cycles the collector had not run for; the trace cannot tell which",
                                 CANNOT_TELL, p["index"]))
        elif unknown and unknown_bytes >= UNEXPLAINED_SHARE * max(peak, 1):
            report.verdict, report.confidence = CANNOT_TELL, "low"
            e.append(ev.Evidence(f"frees in {plural(len(bursts_of[bu.UNKNOWN]), 'burst')}"
                                 f" ({format_bytes(unknown_bytes)}) could be the collector or code going out of scope",
                                 CANNOT_TELL, int(found[0].index)))
            e += _unique(x for g in unknown for x in g.evidence)[:2]
        elif scattered["late_bytes"] >= UNEXPLAINED_SHARE * max(peak, 1):
            report.verdict, report.confidence = CANNOT_TELL, "low"
            e.append(ev.Evidence(f"{format_bytes(scattered['late_bytes'])} made in earlier iterations was freed later,"
                                 " a few at a time, at lines where its scope did not end: the collector freeing small"
                                 " cycles, or a del or a container trimmed there; Python stacks cannot tell which"
                                 " (record with stacks='all')", CANNOT_TELL, scattered["late_event"]))
        elif others:
            explained = [g for gs in others.values() for g in gs]
            report.verdict, report.confidence = NO_CYCLES, _weakest(g.confidence for g in explained)
            explained_bursts = set().union(*(bursts_of[c] for c in others))
            e.append(ev.Evidence(f"{plural(len(explained_bursts), 'burst')} of frees, explained without the collector: "
                                 + "; ".join(f"{bu.CAUSE_WORDS[c]} ({format_bytes(sum(g.bytes for g in gs))})"
                                             for c, gs in others.items()), NO_CYCLES, int(found[0].index)))
            e += _unique(x for g in explained if g.confidence == report.confidence for x in g.evidence)[:3]
            if unknown:
                e.append(ev.Evidence(f"{format_bytes(unknown_bytes)} more in small groups nothing recorded explains",
                                     CANNOT_TELL, int(found[0].index)))
        elif found and unknown:
            # Groups nothing recorded explains, too small to decide the verdict.
            report.verdict, report.confidence = NO_CYCLES, "medium"
            e.append(ev.Evidence(f"{plural(len(found), 'burst')} of frees, none explained by the collector: frees in"
                                 f" {plural(len(bursts_of[bu.UNKNOWN]), 'burst')} ({format_bytes(unknown_bytes)})"
                                 " nothing recorded explains, less than a tenth of the peak allocated memory",
                                 NO_CYCLES, int(found[0].index)))
            e += _unique(x for g in unknown for x in g.evidence)[:2]
        elif found:
            report.verdict, report.confidence = NO_CYCLES, "medium"
            e.append(ev.Evidence(f"{plural(len(found), 'burst')} of frees, none freeing {MIN_SITE_LIVES} or more"
                                 " allocations of one call site: no pile the collector gave back", NO_CYCLES,
                                 int(found[0].index)))
        elif frees < MIN_BURST and not piles:
            # A trace with fewer frees than a burst holds could not have shown one.
            report.verdict, report.confidence = CANNOT_TELL, "low"
            e.append(ev.Evidence(f"the trace holds only {plural(frees, 'free')}, fewer than one burst ({MIN_BURST}):"
                                 " it is too short to show what the collector does", CANNOT_TELL))
        else:
            _no_bursts(report, piles)
        alt.append({"verdict": "reference cycles",
                    "why": "not excluded: nothing recorded tells" if report.verdict == CANNOT_TELL else
                    "rejected: no collector frame on any free's stack" if report.confidence == "high" else
                    "rejected: no burst freed memory the way the collector does (out of order, at a line where it"
                    " did not go out of scope)" if found else "rejected: nothing was freed in bursts"})
    for cause, gs in others.items():
        alt.append({"verdict": bu.CAUSE_WORDS[cause], "bytes": sum(g.bytes for g in gs),
                    "confidence": _weakest(g.confidence for g in gs),
                    "why": "explains " + _frees_in(bursts_of[cause], bursts_of.get(bu.CYCLE, set()))})


def _frees_in(bursts: set[int], collected: set[int]) -> str:
    """Which bursts a cause explains frees in (``bursts``), and where the report lists them:
    ``other_bursts``, but for those the collector freed in too (``collected``: ``bursts``)."""
    beside = len(bursts & collected)
    where = "other_bursts" if not beside else \
        "bursts, where the collector freed too" if beside == len(bursts) else \
        f"{len(bursts) - beside:,} in other_bursts, {beside:,} in bursts, where the collector freed too"
    return f"frees in {plural(len(bursts), 'burst')} ({where})"


def _no_bursts(report: CycleReport, piles: list[dict[str, Any]]) -> None:
    report.verdict, report.confidence = NO_CYCLES, "medium"
    report.evidence.append(ev.Evidence("no burst of frees in the trace: nothing the collector freed; memory held by"
                                       " cycles it never collected would look like a leak (see memtui leaks)",
                                       NO_CYCLES))
    for p in piles:
        report.evidence.append(ev.Evidence(
            f"what piled up until the OOM at event {p['index']:,} ({format_bytes(p['bytes'])} from {p['site']}) was"
            f" freed {p['freed_by']}", NO_CYCLES, p["index"]))


def _oom_piles(dev: DeviceModel, spans: LifeSpans, life_site: np.ndarray, sites: CallSites,
               found: list[bu.FreeBurst]) -> list[dict[str, Any]]:
    """At each OOM, a pile: the one stack (the same line reached the same way, as a loop
    appending does) holding at least half of what was live in at least MIN_SITE_LIVES
    allocations; and what freed those. A step's working set comes from many stacks."""
    n_lives = len(dev.lives)
    start, stop, size = spans.start[:n_lives], spans.stop[:n_lives], spans.size[:n_lives]
    stack = spans.stack[:n_lives].astype(np.int64) + 1
    causes = list(bu.CAUSE_WORDS)
    cause_of = np.full(n_lives, -1, np.int64)
    for b in found:
        for g in b.groups:
            cause_of[g.lives] = causes.index(g.cause)
    out = []
    n = len(dev.trace)
    for i in dev.oom_indices():
        live = np.nonzero((start <= i) & (stop > i))[0]
        if len(live) < MIN_SITE_LIVES:
            continue
        per_stack = np.bincount(stack[live], weights=size[live].astype(np.float64))
        k = int(np.argmax(per_stack))
        mine = live[stack[live] == k]
        if k == 0 or len(mine) < MIN_SITE_LIVES or per_stack[k] * 2 < size[live].sum():
            continue
        s = int(life_site[mine[0]])
        known = cause_of[mine][cause_of[mine] >= 0]
        if (stop[mine] >= n).all():
            freed_by = "never"
        elif len(known):
            freed_by = causes[int(np.bincount(known).argmax())]
        else:
            freed_by = "one by one"
        out.append({"index": int(i), "site": sites.label(s), "lives": len(mine), "bytes": int(per_stack[k]),
                    "freed_by": freed_by})
    return out


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


def _site_totals(sites: CallSites, size: np.ndarray, cycle_groups: list[tuple[int, bu.SiteGroup]]) -> list[CycleSite]:
    by_site: dict[int, list[tuple[int, bu.SiteGroup]]] = {}
    for k, g in cycle_groups:
        by_site.setdefault(g.site, []).append((k, g))
    out = []
    for s, groups in by_site.items():
        per_burst: dict[int, int] = {}
        for k, g in groups:
            per_burst[k] = per_burst.get(k, 0) + g.bytes
        out.append(CycleSite(
            site=sites.label(s), frames=sites.frame_dicts(s), bursts=len(per_burst),
            lives=sum(len(g.lives) for _, g in groups), bytes=sum(g.bytes for _, g in groups),
            largest_burst_bytes=max(per_burst.values()), rounds=max(g.rounds for _, g in groups)))
    out.sort(key=lambda c: -c.bytes)
    return out


def _bounded(bursts: list[Burst]) -> bool:
    """Repeated teeth of about the same height: the collector keeps the growth in check."""
    if len(bursts) < 2:
        return False
    held = np.array([b.bytes for b in bursts], np.float64)
    return bool(held.max() <= BOUNDED_SPREAD * np.median(held))


def _ooms_while_waiting(dev: DeviceModel, spans: LifeSpans, life_site: np.ndarray,
                        cycle_groups: list[tuple[int, bu.SiteGroup]]) -> list[dict[str, Any]]:
    """At each OOM, what was live from the sites whose memory the collector freed: the
    lives it later freed (``collected_later``), or, when it freed none of them before the
    trace ended, all of them (the newest may still be referenced)."""
    n_lives = len(dev.lives)
    start, stop, size = spans.start[:n_lives], spans.stop[:n_lives], spans.size[:n_lives]
    members = np.nonzero(np.isin(life_site, list({g.site for _, g in cycle_groups})))[0]
    collected = np.zeros(n_lives, bool)
    for _, g in cycle_groups:
        collected[g.lives] = True
    out = []
    for i in dev.oom_indices():
        waiting = members[(start[members] <= i) & (stop[members] > i)]
        later = waiting[collected[waiting]]
        shown = later if len(later) else waiting
        if len(shown):
            out.append({"index": int(i), "lives": len(shown), "bytes": int(size[shown].sum()),
                        "collected_later": bool(len(later))})
    return out
