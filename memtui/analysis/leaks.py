"""What grows: allocations live at snapshot time by call site, and how each site's live
memory moved over the run.

Each site's live bytes are sampled once per iteration (:mod:`memtui.analysis.steps`: step
annotations, else the executions of the most repeated allocation stack, else time
windows). A leak adds memory each iteration that no later iteration gives back, so what
it raises is the site's **floor**: at each sample, the least the site holds at any later
sample. Temporaries never lift it, and neither does memory the program releases only at
the end (the floor is read from the samples, and the last one comes before the final
release). A site **leaks** when its floor rises in at least half of the intervals (and at
least twice): growth across the run. Otherwise it is one of:

* a **plateau**: the floor rose, then stopped (warm-up, optimizer state made at the first
  step, a cache that reached its size);
* **rising**: the floor rose in the run's last part but not all through it: growth that
  had not stopped when the trace ended, too recent to call a leak or a plateau;
* a **sawtooth**: the live bytes grew and fell back to half or less, more than once (a
  KV cache freed after each generation): given back, not leaked;
* **steady**.

Memory made on the autograd engine's thread has no Python stack; it is attributed to the
``backward()`` call it ran under (:mod:`memtui.model.stackless`), so a leaked gradient
still names a line.

The sampling is one pass over the lives: each life adds its bytes to the range of
sample points it spans (a difference array per site, then a cumulative sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtui.analysis import bursts as bu
from memtui.analysis import evidence as ev
from memtui.analysis.attribution import attribute
from memtui.analysis.callsites import CallSites, group_by_site
from memtui.analysis.cycles import CANNOT_TELL as CYCLES_CANNOT_TELL
from memtui.analysis.cycles import CycleReport, find_cycles
from memtui.analysis.live import LifeSpans, life_spans
from memtui.analysis.steps import TIME_WINDOW_POINT, IterationMarks, StepPoints, iteration_marks, step_points
from memtui.analysis.trace_evidence import NO_TRACE, TraceEvidence, has_trace, trace_evidence
from memtui.model import DeviceModel, Snapshot
from memtui.model.segments import ALLOCATED
from memtui.units import format_bytes, plural

MIN_RISES = 2
RISING_SHARE = 0.5
MAX_FLOOR_POINTS = 4096  # samples for the floor (iterations beyond are thinned evenly)
MIN_TEETH = 2  # falls to half or less that make a sawtooth
PARTS = 10  # a run is cut into this many parts to count where its floor rose
LEAK, PLATEAU, SAWTOOTH, STEADY, RISING, RELEASED = "leak", "plateau", "sawtooth", "steady", "rising", "released"
NO_LEAK, CANNOT_TELL = "no leak", "cannot tell"


@dataclass
class SiteGrowth:
    site: int
    label: str
    frames: list[dict[str, Any]]
    bytes: int  # live at snapshot time
    count: int
    series_bytes: list[int]  # live at each step point
    series_count: list[int]
    growing: bool  # the site leaks
    units: int = 0  # steps (or windows) between the first and the last sample
    kind: str = STEADY  # leak, plateau, sawtooth or steady
    floor_growth: int = 0  # how much the floor rose over the run
    rises: int = 0  # iterations in which the floor rose
    intervals: int = 0  # iterations sampled for the floor, less one
    teeth: int = 0  # falls to half or less
    released_at_end: int = 0  # bytes freed after the last sample (the release at the end)

    @property
    def growth_per_unit(self) -> int:
        return self.growth_bytes // self.units if self.units else 0

    @property
    def growth_bytes(self) -> int:
        if self.growing:
            return self.floor_growth
        return self.series_bytes[-1] - self.series_bytes[0] if self.series_bytes else 0

    @property
    def growth_count(self) -> int:
        return self.series_count[-1] - self.series_count[0] if self.series_count else 0

    def to_json(self) -> dict[str, Any]:
        return {"site": self.label, "frames": self.frames, "bytes": self.bytes, "count": self.count,
                "growing": self.growing, "kind": self.kind, "growth_bytes": self.growth_bytes,
                "growth_count": self.growth_count, "growth_per_step": self.growth_per_unit,
                "floor_rises": self.rises, "floor_intervals": self.intervals, "teeth": self.teeth,
                "released_at_end": self.released_at_end,
                "series_bytes": self.series_bytes, "series_count": self.series_count}


@dataclass
class LeakReport:
    device: int
    points: StepPoints
    live_bytes: int
    live_count: int
    sites: list[SiteGrowth] = field(default_factory=list)
    verdict: str = NO_LEAK
    confidence: str = "medium"
    evidence: list[ev.Evidence] = field(default_factory=list)
    alternatives: list[dict[str, Any]] = field(default_factory=list)

    @property
    def growing(self) -> list[SiteGrowth]:
        return [s for s in self.sites if s.growing]

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "verdict": self.verdict, "confidence": self.confidence,
                "evidence": [e.to_json() for e in self.evidence], "alternatives": self.alternatives,
                "live_bytes": self.live_bytes, "live_count": self.live_count,
                "steps": self.points.to_json(), "growing": [s.label for s in self.growing],
                "sites": [s.to_json() for s in self.sites]}


def find_leaks(snapshot: Snapshot, dev: DeviceModel, depth: int = 1, max_points: int = 24,
               windows: int = 10, limit: int | None = 30) -> LeakReport:
    sites = CallSites(snapshot.stacks, depth)
    spans = life_spans(dev)
    attributed = attribute(snapshot, dev, sites, spans.stack, spans.start)
    site_of_life, labels = attributed.of_item, attributed.labels
    n_sites = len(labels)
    blocks = dev.blocks
    live = blocks.state == ALLOCATED
    end_bytes, end_count = group_by_site(sites.of_stacks(blocks.stack[live]), blocks.size[live], n_sites)
    # Blocks allocated on the autograd thread: their life's attributed site.
    linked = np.nonzero(live & (dev.block_life >= 0))[0]
    if len(linked) and n_sites > len(sites):
        site_of_block = site_of_life[dev.block_life[linked]]
        moved = site_of_block >= len(sites)
        if moved.any():
            old = sites.of_stacks(blocks.stack[linked[moved]])
            np.subtract.at(end_bytes, old, blocks.size[linked[moved]].astype(np.int64))
            np.subtract.at(end_count, old, 1)
            np.add.at(end_bytes, site_of_block[moved], blocks.size[linked[moved]].astype(np.int64))
            np.add.at(end_count, site_of_block[moved], 1)

    points = step_points(snapshot, dev, max_points, windows)
    series_bytes, series_count = sample_by_site(spans, site_of_life, points.indices, n_sites)
    marks = iteration_marks(snapshot, dev)
    fine = marks[2] if marks is not None else points.indices
    fine = fine[_thin_positions(len(fine), MAX_FLOOR_POINTS)]
    fine_bytes, _ = sample_by_site(spans, site_of_life, fine, n_sites)
    kinds, floor_growth, rises = classify_growth(fine_bytes)
    teeth = _teeth(fine_bytes)
    last = int(fine[-1]) if len(fine) else -1
    kept = _kept_parts(spans, site_of_life, fine, np.flatnonzero(kinds == LEAK_CODE), fine_bytes)
    for site, (made_in, parts, kept_bytes) in kept.items():
        # A working set that grows (a batch) or a cache filled again after being emptied
        # lifts the floor too, but what they hold at the end is recent: what a leak holds at
        # the end was made all through the run.
        if made_in * 2 < parts or kept_bytes * 2 < floor_growth[site]:
            kinds[site] = KINDS.index(SAWTOOTH) if teeth[site] else KINDS.index(PLATEAU)
            if not teeth[site] and _rose_in_last_part(fine_bytes[site]):
                kinds[site] = KINDS.index(RISING)
    released = _released_after(spans, site_of_life, last, n_sites)
    candidates = np.flatnonzero(kinds == LEAK_CODE)
    # The bursts' causes matter only to a site that would be called a leak.
    seen = trace_evidence(snapshot, dev) if len(candidates) else None
    let_go = _let_go_by_bursts(seen, spans, site_of_life, last, candidates) if seen is not None else {}
    for site in let_go:
        kinds[site] = KINDS.index(RELEASED)
    growing = kinds == LEAK_CODE

    # Growing sites first (by growth), then the rest by what they hold at the end.
    present = (end_count > 0) | growing
    order = np.lexsort((-end_bytes, -np.where(growing, floor_growth, 0), ~growing))
    report = LeakReport(dev.device, points, int(end_bytes.sum()), int(end_count.sum()))
    for site in order:
        if not present[site] or (limit is not None and len(report.sites) >= limit and not growing[site]):
            continue
        report.sites.append(SiteGrowth(
            site=int(site), label=labels[site], frames=attributed.frames(int(site)),
            bytes=int(end_bytes[site]), count=int(end_count[site]),
            series_bytes=[int(v) for v in series_bytes[site]], series_count=[int(v) for v in series_count[site]],
            growing=bool(growing[site]), units=_units(points, fine, marks), kind=KINDS[int(kinds[site])],
            floor_growth=int(floor_growth[site]), rises=int(rises[site]), intervals=max(len(fine) - 1, 0),
            teeth=int(teeth[site]), released_at_end=int(released[site])))
    if not has_trace(dev):
        report.verdict, report.confidence = CANNOT_TELL, "low"
        report.evidence.append(ev.Evidence(NO_TRACE, CANNOT_TELL))
        report.alternatives.append({"verdict": LEAK, "why": "not excluded: nothing recorded tells"})
        return report
    _decide(report, labels, kinds, floor_growth, rises, teeth, released, len(fine), marks)
    for site, (cause, held) in let_go.items():
        report.evidence.append(ev.Evidence(
            f"{labels[site]} kept more all through the run, but {format_bytes(held)} of what it held at the last"
            f" sample was then freed by {bu.CAUSE_WORDS[cause]} (as `memtui cycles` and `memtui oom` show): held"
            " by that, not kept by the program", RELEASED))
    if report.verdict == LEAK:  # only a candidate becomes a leak, so the trace was read above
        _weigh_cycles(report, find_cycles(snapshot, dev, seen=seen))
    return report


def _weigh_cycles(report: LeakReport, cycles: CycleReport) -> None:
    """A leak only where reference cycles are ruled out: memory that cycles hold grows like
    a leak until the collector runs. When the cycle analysis of the same device cannot tell
    (bursts or late frees nothing recorded explains, no stacks on the frees), neither can
    this one: both answers are given as possible, with the cycle analysis's reason."""
    if cycles.verdict != CYCLES_CANNOT_TELL:
        return
    reason = cycles.evidence[0].text if cycles.evidence else "it cannot tell"
    report.verdict, report.confidence = CANNOT_TELL, "low"
    report.evidence.insert(0, ev.Evidence(
        "it grew like a leak, but memory held by reference cycles grows the same way until the collector runs,"
        f" and the cycle analysis of this device cannot rule the collector out (memtui cycles): {reason}",
        CANNOT_TELL))
    report.alternatives.insert(0, {"verdict": "reference cycles the collector frees late",
                                   "why": "not excluded: memtui cycles cannot tell on this device"})
    report.alternatives.insert(0, {"verdict": LEAK, "why": "not excluded: it grew all through the run"})


def _let_go_by_bursts(seen: TraceEvidence, spans: LifeSpans, site_of_life: np.ndarray, last: int,
                      candidates: np.ndarray) -> dict[int, tuple[str, int]]:
    """Candidate leak sites at least half of whose memory held at the last sample was freed
    in a burst of an exception's traceback or of the collector: (cause, bytes) per site."""
    out: dict[int, tuple[str, int]] = {}
    if last < 0 or not len(candidates) or not seen.bursts:
        return out
    n_lives = len(seen.freed_by)
    alive = np.flatnonzero((spans.start[:n_lives] >= 0) & (spans.start[:n_lives] <= last)
                           & (spans.stop[:n_lives] > last))
    for site in candidates.tolist():
        mine = alive[site_of_life[alive] == site]
        held = int(spans.size[mine].sum())
        for cause in _RELEASING_CAUSES:
            freed = int(spans.size[mine[seen.freed_by_cause(mine, cause)]].sum())
            if held and freed * 2 >= held:
                out[site] = (cause, freed)
                break
    return out


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


KINDS = (STEADY, LEAK, PLATEAU, SAWTOOTH, RISING, RELEASED)
# Bursts whose cause says what held the memory: not the program keeping it on purpose.
_RELEASING_CAUSES = (bu.EXCEPTION, bu.CYCLE)
LEAK_CODE = KINDS.index(LEAK)


def classify_growth(series: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of per-iteration samples: its kind (an index into KINDS), how much its floor
    rose, and in how many of the run's parts. The floor at a sample is the least of that
    sample and every later one. The samples are cut into at most ``PARTS`` equal parts, so
    that a line sampled twice per iteration counts the same as one sampled once: a leak's
    floor rises in at least half of the parts (and at least ``MIN_RISES``)."""
    n_rows, k = series.shape
    if k < 3:
        return np.zeros(n_rows, np.int64), np.zeros(n_rows, np.int64), np.zeros(n_rows, np.int64)
    floor = np.minimum.accumulate(series[:, ::-1], axis=1)[:, ::-1]
    steps = np.diff(floor, axis=1)
    parts = min(PARTS, steps.shape[1])
    part_of = (np.arange(steps.shape[1]) * parts) // steps.shape[1]
    rose = np.zeros((n_rows, parts), bool)
    for p in range(parts):
        rose[:, p] = (steps[:, part_of == p] > 0).any(axis=1)
    rises = rose.sum(axis=1)
    growth = floor[:, -1] - floor[:, 0]
    needed = max(MIN_RISES, int(np.ceil(RISING_SHARE * parts)))
    kinds = np.zeros(n_rows, np.int64)
    kinds[(steps > 0).any(axis=1)] = KINDS.index(PLATEAU)
    # A floor that still rose in the run's last part did not stop: not a plateau.
    kinds[rose[:, -1] & (growth > 0)] = KINDS.index(RISING)
    kinds[(rises >= needed) & (growth > 0)] = LEAK_CODE
    teeth = _teeth(series)
    kinds[(kinds != LEAK_CODE) & (teeth >= MIN_TEETH)] = KINDS.index(SAWTOOTH)
    return kinds, growth, rises


def _rose_in_last_part(row: np.ndarray) -> bool:
    """Whether the row's floor rose in the last of the run's parts (as classify_growth cuts them)."""
    k = len(row)
    if k < 3:
        return False
    floor = np.minimum.accumulate(row[::-1])[::-1]
    steps = np.diff(floor)
    parts = min(PARTS, len(steps))
    last = (np.arange(len(steps)) * parts) // len(steps) == parts - 1
    return bool((steps[last] > 0).any())


def growing_sites(series: np.ndarray) -> np.ndarray:
    """Mask of the rows whose floor rises in at least half of the intervals (and at least twice)."""
    growing: np.ndarray = classify_growth(series)[0] == LEAK_CODE
    return growing


def _teeth(series: np.ndarray) -> np.ndarray:
    """Per row: how often the samples fell to at most half of the high since the last fall."""
    out = np.zeros(series.shape[0], np.int64)
    if series.shape[1] < 2:
        return out
    # Only rows that ever fell to half of a high before them can have a tooth.
    high = np.maximum.accumulate(series, axis=1)[:, :-1]
    candidates = np.nonzero(((series[:, 1:] * 2 <= high) & (high > 0)).any(axis=1))[0]
    for r in candidates:
        count, top = 0, 0
        for v in series[r].tolist():
            if v > top:
                top = v
            elif top > 0 and v * 2 <= top:
                count += 1
                top = v
        out[r] = count
    return out


def _kept_parts(spans: LifeSpans, site_of_life: np.ndarray, points: np.ndarray, candidates: np.ndarray,
                series: np.ndarray | None = None) -> dict[int, tuple[int, int, int]]:
    """For each candidate site, the lives it held at the last sample (and, when its
    samples fell to half or less, made before the last such fall): in how many of the
    run's parts they were made, of how many parts, and their bytes."""
    out: dict[int, tuple[int, int, int]] = {}
    k = len(points)
    if k < 2:
        return out
    parts = min(PARTS, k - 1)
    last = int(points[-1])
    alive = (spans.start >= 0) & (spans.start < last) & (spans.stop > last)
    for site in candidates.tolist():
        mine = np.flatnonzero(alive & (site_of_life == site))
        position = np.searchsorted(points, spans.start[mine], "right")  # samples before it was made
        fell = _last_fall(series[site]) if series is not None else -1
        if fell >= 0:
            # Fell back to half or less at sample ``fell``: only what survived the fall counts.
            mine, position = mine[position <= fell], position[position <= fell]
        part = np.minimum(position * parts // k, parts - 1)
        out[site] = (len(np.unique(part)), parts, int(spans.size[mine].sum()))
    return out


def _last_fall(row: np.ndarray) -> int:
    """The last sample at which the row fell to half or less of its high since the last such fall (-1: none)."""
    at, high = -1, 0
    for i, v in enumerate(row.tolist()):
        if v > high:
            high = v
        elif high > 0 and v * 2 <= high:
            at, high = i, v
    return at


def _released_after(spans: LifeSpans, site_of_life: np.ndarray, last: int, n_sites: int) -> np.ndarray:
    """Bytes each site freed after the last sample: the release at the end of the run."""
    if last < 0:
        return np.zeros(n_sites, np.int64)
    late = (spans.start >= 0) & (spans.start <= last) & (spans.stop > last) & (spans.stop < spans.n_events)
    return np.rint(np.bincount(site_of_life[late], weights=spans.size[late].astype(np.float64),
                               minlength=n_sites)).astype(np.int64)


def _units(points: StepPoints, fine: np.ndarray, marks: IterationMarks | None) -> int:
    if marks is not None:
        return max(len(fine) - 1, 0) if len(marks[2]) <= MAX_FLOOR_POINTS else len(marks[2]) - 1
    return points.units_between_ends()


def _thin_positions(count: int, limit: int) -> np.ndarray:
    if count <= limit:
        return np.arange(count, dtype=np.int64)
    return np.unique(np.rint(np.linspace(0, count - 1, limit)).astype(np.int64))


def _cannot_tell(report: LeakReport, why: str, leak_why: str, other: tuple[str, str] | None = None) -> None:
    """A ``cannot tell`` verdict with its evidence: why a leak is not excluded, and ``other``,
    another explanation (verdict, why) not excluded either."""
    report.verdict, report.confidence = CANNOT_TELL, "low"
    report.evidence.append(ev.Evidence(why, CANNOT_TELL))
    report.alternatives.append({"verdict": LEAK, "why": leak_why})
    if other is not None:
        report.alternatives.append({"verdict": other[0], "why": other[1]})


def _decide(report: LeakReport, labels: list[str], kinds: np.ndarray, floor_growth: np.ndarray,
            rises: np.ndarray, teeth: np.ndarray, released: np.ndarray, samples: int,
            marks: IterationMarks | None) -> None:
    f, e, alt = format_bytes, report.evidence, report.alternatives
    how = ({"annotation": f"{samples} step annotations ('{marks[1]}')" if marks else "",
            "iterations": f"{samples} returns to the loop's statement ({marks[1]})" if marks else ""}
           .get(marks[0], "") if marks else f"{samples} time windows that hold events")
    leaks = np.flatnonzero(kinds == LEAK_CODE)
    if samples < 4:
        report.verdict, report.confidence = CANNOT_TELL, "low"
        e.append(ev.Evidence(f"only {plural(samples, 'sample')} ({how}): too few iterations to tell growth from"
                             " a plateau", CANNOT_TELL))
        return
    parts = min(PARTS, samples - 1)
    # Without steps, the samples are the ends of the time windows that hold events (windows
    # without one share the sample before them), and the run's parts lie between them.
    by_windows = f"{plural(samples, 'sample')}, {TIME_WINDOW_POINT}"
    if len(leaks) and marks is None:
        # Time windows are not iterations: memory that rises through one long step (a
        # forward pass keeping its activations) rises in every window too.
        s = int(leaks[np.argmax(floor_growth[leaks])])
        _cannot_tell(report, f"{labels[s]} kept more in {rises[s]} of the run's {parts} parts"
                     f" (+{f(int(floor_growth[s]))}; {by_windows}), but the trace shows no repeated step"
                     " (no step annotations, no statement the program returns to): growth within one step cannot"
                     " be told from a leak",
                     "cannot be excluded: it grew in most windows",
                     ("one step's working set (activations kept until backward)",
                      "cannot be excluded: a window is not an iteration"))
        return
    if len(leaks):
        top = leaks[np.argsort(-floor_growth[leaks])]
        s = int(top[0])
        if marks is not None and marks[0] == "iterations" and released[s] * 2 >= floor_growth[s]:
            # A statement returned to is a loop, not always a step: a loop inside one call (a
            # generation's tokens, a batch's pieces) keeps what it makes until the call
            # returns, as a leak does until its holder goes.
            _cannot_tell(report, f"{labels[s]} kept more in {rises[s]} of the run's {parts} parts"
                         f" (+{f(int(floor_growth[s]))}; {samples} samples at {how}), but {f(int(released[s]))} of"
                         " it was given back after the loop, before the trace ended: a loop inside one call keeping"
                         " what it makes until it returns (a generation's tokens or cache) frees so, as does a leak"
                         " whose holder went; with no step marks the trace cannot tell",
                         "not excluded: it grew all through the loop",
                         ("one call's working set, given back when it returned",
                          "not excluded: the memory was freed before the trace ended"))
            return
        report.verdict = LEAK
        report.confidence = "high" if rises[s] * 5 >= parts * 4 and parts >= 8 else "medium"
        e.append(ev.Evidence(f"{labels[s]}: what it keeps rose in {rises[s]} of the run's {parts} parts"
                             f" (+{f(int(floor_growth[s]))}; {samples} samples at {how}), and the memory it held at"
                             " the last sample was made all through the run", LEAK))
        if released[s]:
            e.append(ev.Evidence(f"it was released only at the end ({f(int(released[s]))} freed after the last"
                                 " sample): held for the whole run by something that outlived the loop", LEAK))
        if len(top) > 1:
            e.append(ev.Evidence(f"{plural(len(top) - 1, 'other site')} grew the same way: "
                                 + ", ".join(labels[int(t)] for t in top[1:4]), LEAK))
        alt.append({"verdict": "plateau (warm-up, a cache reaching its size)",
                    "why": f"rejected: the growth did not stop: it rose in {rises[s]} of {parts} parts"})
        alt.append({"verdict": "growth given back (a cache or batch freed each round)",
                    "why": "rejected: what it held at the end was made all through the run"})
        return
    if marks is None:
        # Time windows are not iterations, for "no leak" as for "leak": a file holding one
        # forward pass, one step or one long call shows its working set rise and fall, and
        # says nothing of what each repeat of it would keep.
        _cannot_tell(report, f"nothing kept more all through the run's {parts} parts ({by_windows}), but the trace"
                     " shows no repeated step (no step annotations, no statement the program returns to): one pass's"
                     " working set says nothing of what repeating it would keep",
                     "not excluded: no iterations to compare")
        return
    report.verdict = NO_LEAK
    # Only iterations compared with each other make "nothing grew" sure.
    report.confidence = "high" if parts >= 8 else "medium"
    rising = np.flatnonzero(kinds == KINDS.index(RISING))
    if len(rising):
        s = int(rising[np.argmax(floor_growth[rising])])
        report.confidence = "medium"
        if rises[s] * 2 >= parts:
            # Grew in most parts and had not stopped, though what it held at the end was made
            # lately: a buffer replaced by a bigger one each round (torch.cat) does that, leak or not.
            _cannot_tell(report, f"{labels[s]} kept more in {rises[s]} of the run's {parts} parts"
                         f" (+{f(int(floor_growth[s]))}) and had not stopped when the trace ended; what it held at"
                         " the end was made lately, as by a buffer grown by copying (torch.cat) or a growing working"
                         " set: leak or not, the trace cannot tell", "not excluded: the growth had not stopped")
            return
        e.append(ev.Evidence(f"{labels[s]} still kept more in the run's last part (+{f(int(floor_growth[s]))},"
                             f" rose in {rises[s]} of {parts} parts): growth that had not stopped when the trace"
                             " ended", RISING))
    plateaus = np.flatnonzero(kinds == KINDS.index(PLATEAU))
    saws = np.flatnonzero(kinds == KINDS.index(SAWTOOTH))
    e.append(ev.Evidence(f"no site kept more in at least half of the run's {parts} parts ({samples} samples at"
                         f" {how}) with what it held at the end made all through the run", NO_LEAK))
    if len(plateaus):
        s = int(plateaus[np.argmax(floor_growth[plateaus])])
        e.append(ev.Evidence(f"growth that stopped or was given back: {labels[s]} rose in {rises[s]} of {parts}"
                             f" parts (+{f(int(floor_growth[s]))})", PLATEAU))
    if len(saws):
        s = int(saws[np.argmax(teeth[saws])])
        e.append(ev.Evidence(f"growth given back: {labels[s]} grew and fell to half or less {teeth[s]} times",
                             SAWTOOTH))
    alt.append({"verdict": "leak", "why": "rejected: no site kept more all through the run"})
