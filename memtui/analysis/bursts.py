"""Bursts of frees and why each happened.

A **burst** is a run of at least ``MIN_BURST`` frees with no allocation (or OOM) between them. The
cycle collector frees like that, but so does ordinary code: a list or dict of tensors
going out of scope, ``zero_grad``, an exception's traceback let go. Timing and sizes
cannot tell these apart; the frees' stacks and the lives' history can
(:mod:`memtui.analysis.evidence`). Each burst is split by call site (the lives of one site
freed in it, at least ``MIN_SITE_LIVES``), and each such group gets a cause:

* ``cycle``: the collector's frames are on the free stacks (high); or, with Python stacks
  only, at a line that is not where their scope ended, either the burst freed lives of
  earlier iterations of the site while the newest one, made before it, stayed alive (the
  collector frees what is unreachable; the object of the current iteration is still
  referenced), or the lives were made over at least ``MIN_STEPS`` annotated steps
  (medium). Inside one iteration the newest left alive says nothing (autocast lets a
  forward's casts go when its block exits while the forward's activations stay);
* ``exception``: traceback frames on the free stacks (high); or the burst directly follows
  an OOM and frees what was made under the failing call (medium);
* ``refcount``: interpreter deallocation without the collector (high); or, with Python
  stacks, freed at a line of their own allocation stack, where the function that made
  them had returned, or inside a library's own code (medium). Frees inside a library's
  code that left the site's newest allocation alive, of lives made over fewer than
  ``MIN_STEPS`` rounds, are ``unknown``: libraries that keep what they made and drop it on
  their own schedule (autocast, packed sequences) free so too;
* ``autograd``: released on the autograd engine's thread during backward;
* ``teardown``: module or interpreter teardown;
* ``unknown``: nothing recorded tells (low).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.analysis import evidence as ev
from memtui.analysis.callsites import CallSites
from memtui.analysis.live import LifeSpans
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.stackless import stackless_context
from memtui.model.trace import TraceColumns
from memtui.units import format_bytes, plural

MIN_BURST = 8  # lives freed back to back
MIN_SITE_LIVES = 4  # of them from one call site
MIN_STEPS = 4  # annotated steps the lives of one site were made over

CYCLE, EXCEPTION, REFCOUNT, AUTOGRAD, TEARDOWN, UNKNOWN = (
    "cycle", "exception", "refcount", "autograd", "teardown", "unknown")
_FROM_RELEASE = {ev.COLLECTOR: CYCLE, ev.EXCEPTION: EXCEPTION, ev.REFCOUNT: REFCOUNT, ev.AUTOGRAD: AUTOGRAD,
                 ev.TEARDOWN: TEARDOWN}
CAUSE_WORDS = {
    CYCLE: "the garbage collector (reference cycles)",
    EXCEPTION: "an exception's traceback let go",
    REFCOUNT: "reference counting (the program dropped them)",
    AUTOGRAD: "the autograd engine during backward",
    TEARDOWN: "module or interpreter teardown",
    UNKNOWN: "cannot tell",
}


@dataclass
class SiteGroup:
    """The lives of one call site freed in one burst, and what their stacks say."""

    site: int
    lives: np.ndarray  # indices into the spans
    bytes: int
    rounds: int
    release: str  # from the C++ frames of the frees (evidence.RELEASES)
    native: bool  # the frees carry C++ frames
    relation: str  # the free's Python line against the allocation's stack (evidence.python_relation)
    free_frame: tuple[str, int, str] | None
    survivors: int  # newer lives of the site made before the burst that it left alive
    newest_survived: bool  # the site's newest life made before the burst outlived it
    after_oom: int  # the OOM this burst directly follows and whose call made these lives, or -1
    cause: str = UNKNOWN
    confidence: str = "low"
    evidence: list[ev.Evidence] = field(default_factory=list)


@dataclass
class FreeBurst:
    index: int  # first free
    end_index: int  # last free
    lives: np.ndarray  # every life freed in the burst
    groups: list[SiteGroup]

    @property
    def cause(self) -> str:
        """The cause of the burst's largest group (by bytes)."""
        if not self.groups:
            return UNKNOWN
        return max(self.groups, key=lambda g: g.bytes).cause


def find_bursts(snapshot: Snapshot, dev: DeviceModel, spans: LifeSpans,
                life_site: np.ndarray, rounds_of: np.ndarray, releases: ev.FreeStacks,
                by_steps: bool = False, own_free_stacks: bool = True) -> list[FreeBurst]:
    """Every burst of the device's trace, each split by site and explained. ``rounds_of``
    gives the round of an allocation at each event (steps when ``by_steps``);
    ``own_free_stacks`` is False when the frees carry their allocation's stacks
    (context="alloc"), which then say nothing of why they were freed."""
    trace = dev.trace
    n_lives = len(dev.lives)
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    if len(trace) == 0 or n_lives == 0:
        return []
    # Frees with equal counts have no allocation (and no OOM: a release before the failure
    # and one after it are not one burst) between them.
    is_alloc = (trace.action == act.ALLOC) | (trace.action == act.OOM)
    allocs_before = np.cumsum(is_alloc)
    freed = np.nonzero((stop < len(trace)) & (start >= 0))[0]
    freed = freed[np.argsort(stop[freed], kind="stable")]
    group = allocs_before[stop[freed]]
    groups, sizes = np.unique(group, return_counts=True)
    ooms = dev.oom_indices()
    # The lives of each site by when they were made, found by one sort rather than a scan per burst.
    by_site = np.lexsort((start, life_site[:n_lives]))
    site_sorted = life_site[:n_lives][by_site]
    start_sorted = start[by_site]
    out = []
    for g in groups[sizes >= MIN_BURST]:
        lives = freed[group == g]
        first, last = int(stop[lives].min()), int(stop[lives].max())
        site_groups = []
        for s in np.unique(life_site[lives]):
            mine = lives[life_site[lives] == s]
            if len(mine) < MIN_SITE_LIVES:
                continue
            lo, hi = np.searchsorted(site_sorted, [s, s + 1])
            site_groups.append(_site_group(snapshot, dev, spans, by_site[lo:hi], start_sorted[lo:hi], rounds_of,
                                           releases, int(s), mine, first, last, ooms, allocs_before, by_steps,
                                           own_free_stacks))
        out.append(FreeBurst(first, last, lives, site_groups))
    return out


def _site_group(snapshot: Snapshot, dev: DeviceModel, spans: LifeSpans, same: np.ndarray, same_start: np.ndarray,
                rounds_of: np.ndarray, releases: ev.FreeStacks, site: int, lives: np.ndarray, first: int, last: int,
                ooms: np.ndarray, allocs_before: np.ndarray, by_steps: bool, own_free_stacks: bool = True) -> SiteGroup:
    """``same``: every life of the site, by when it was made (``same_start``); ``lives``:
    those freed in this burst."""
    trace = dev.trace
    n_lives = len(dev.lives)
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    size = spans.size[:n_lives]
    free_stacks = trace.stack[stop[lives]].astype(np.int64)
    kinds = releases.of_stacks(free_stacks)
    weights = np.bincount(kinds, weights=size[lives].astype(np.float64), minlength=len(ev.RELEASES))
    release = ev.RELEASES[int(np.argmax(weights))]
    native = bool(releases.has_native(free_stacks).any())
    # The Python line of the most common (free stack, alloc stack) pair.
    alloc_stacks = spans.stack[lives].astype(np.int64)
    pairs, counts = np.unique(np.stack([free_stacks, alloc_stacks]), axis=1, return_counts=True)
    free_sid, alloc_sid = (int(v) for v in pairs[:, int(np.argmax(counts))])
    if alloc_sid < 0:
        alloc_sid = backward_stack(snapshot, dev, int(start[lives[alloc_stacks == alloc_sid][0]]))
    free_py = ev.python_frames(snapshot.stacks, free_sid)
    relation, _ = ev.python_relation(free_py, ev.python_frames(snapshot.stacks, alloc_sid))
    # Lives of this site made before the burst, after the oldest it freed, and left alive.
    oldest = int(start[lives].min())
    i0, i1 = np.searchsorted(same_start, [oldest + 1, first])
    window = same[i0:i1]
    left = window[stop[window] > last]
    newest = int(same[i1 - 1]) if i1 > 0 and same_start[i1 - 1] >= 0 else -1
    after_oom = _after_oom(snapshot, trace, ooms, allocs_before, first, alloc_sid, free_py)
    grp = SiteGroup(site=site, lives=lives, bytes=int(size[lives].sum()),
                    rounds=int(len(np.unique(rounds_of[start[lives]]))), release=release, native=native,
                    relation=relation, free_frame=free_py[0] if free_py else None, survivors=len(left),
                    newest_survived=bool(newest >= 0 and stop[newest] > last), after_oom=after_oom)
    if not own_free_stacks:
        grp.cause, grp.confidence = UNKNOWN, "low"
        grp.evidence.append(ev.Evidence("every free in the trace carries its allocation's stack (recorded with"
                                        " context='alloc'): where and why these were freed is not recorded",
                                        "cannot tell", first))
        return grp
    _decide(snapshot, dev, grp, releases, free_sid, alloc_sid, first, int(start[newest]) if newest >= 0 else first,
            by_steps)
    return grp


def backward_stack(snapshot: Snapshot, dev: DeviceModel, i: int) -> int:
    """For an event without a stack made on the autograd thread, the stack of the main
    thread's last event (inside the backward() call it ran under); else -1."""
    context = stackless_context(snapshot, dev.device, i) if i >= 0 else None
    if context is None or not context.in_backward:
        return -1
    return int(dev.trace.stack[context.event])


def _after_oom(snapshot: Snapshot, trace: TraceColumns, ooms: np.ndarray, allocs_before: np.ndarray, first: int,
               alloc_sid: int, free_py: list[tuple[str, int, str]]) -> int:
    """The OOM right before ``first`` (no allocation between) that raised inside a call
    which made these lives, or -1. The frames a traceback keeps are the OOM's frames inner
    to the one that handled it (the function of the free's line): the lives must share one."""
    before = ooms[ooms < first]
    if not len(before) or not free_py:
        return -1
    oom = int(before[-1])
    if allocs_before[first] != allocs_before[oom]:
        return -1
    handler = (free_py[0][0], free_py[0][2])
    oom_frames = ev.python_frames(snapshot.stacks, int(trace.stack[oom]))
    if free_py[0] in oom_frames:
        return -1  # freed at the very call that raised: that call had returned, no handler ran here
    inner = []
    for frame in oom_frames:
        if (frame[0], frame[2]) == handler:
            break
        inner.append(frame)
    else:
        return -1  # the handler is not on the failing call's stack
    return oom if set(inner) & set(ev.python_frames(snapshot.stacks, alloc_sid)) else -1


def _decide(snapshot: Snapshot, dev: DeviceModel, g: SiteGroup, releases: ev.FreeStacks, free_sid: int,
            alloc_sid: int, first: int, newest: int, by_steps: bool) -> None:
    """Set the group's cause, confidence and evidence."""
    e = g.evidence
    where = ev.frame_text(g.free_frame) if g.free_frame else ""
    if g.native and g.release != ev.UNKNOWN:
        g.cause, g.confidence = _FROM_RELEASE[g.release], "high"
        supports = "cycles" if g.cause == CYCLE else "not cycles"
        e.append(ev.Evidence(f"the frees' C++ stacks show {releases.marker_of(free_sid) or g.release}: "
                             f"{ev.RELEASE_WORDS[g.release]}" + (f", at {where}" if where else ""), supports, first))
        if g.cause != CYCLE:
            e.append(ev.Evidence("no collector frame on these frees' stacks (the collector is on every stack of"
                                 " memory it frees)", "not cycles", first))
        return
    if g.after_oom >= 0:
        g.cause, g.confidence = EXCEPTION, "medium"
        e.append(ev.Evidence(f"freed right after the OOM at event {g.after_oom:,} (no allocation between), and"
                             " made under the call that failed: the exception's traceback held them",
                             "not cycles", g.after_oom))
    elif g.relation == ev.SCOPE_EXIT:
        g.cause, g.confidence = REFCOUNT, "medium"
        e.append(ev.Evidence(f"freed at {where}, a line of their own allocation stack: the function that made"
                             " them had returned", "not cycles", first))
    elif g.relation == ev.NO_STACK and _in_backward(snapshot, dev, first):
        g.cause, g.confidence = AUTOGRAD, "medium"
        e.append(ev.Evidence("freed on the autograd engine's thread during backward() (no Python stack)",
                             "not cycles", first))
    elif in_library(g) and g.newest_survived and 2 <= g.rounds < MIN_STEPS:
        # Library code that keeps what it made and drops it on its own schedule (autocast's
        # casts let go as its block exits, a packed sequence's pieces kept until the next
        # batch) leaves the newest alive too, over a round or two; with Python stacks only,
        # that looks like the collector running there. What piled up over more rounds than
        # a library keeps is the collector's, wherever it happened to run.
        g.cause, g.confidence = UNKNOWN, "low"
        e.append(ev.Evidence(f"freed inside library code ({where}), leaving the newest allocation of the site alive:"
                             " the collector running there, or the library letting go of what it held; Python"
                             " stacks alone cannot tell (record with stacks='all')", "cannot tell", first))
    elif g.relation in (ev.SAME_FUNCTION, ev.SAME_LINE, ev.ELSEWHERE, ev.IN_LIBRARY) and (
            (g.newest_survived and g.rounds >= 2) or (by_steps and g.rounds >= MIN_STEPS)):
        # The newest left alive tells the collector only across iterations: freeing an older
        # iteration's objects while the current one's is in use. Inside one iteration (a
        # forward's casts let go when autocast exits) some of a line's tensors outlive the
        # others whatever freed them.
        g.cause, g.confidence = CYCLE, "medium"
        if g.newest_survived:
            e.append(ev.Evidence("freed out of order: the burst left the newest allocation of the site, made before"
                                 " it, alive, as the collector does with an object still in use; a list or scope"
                                 " going away frees the newest too", "cycles", newest))
        if by_steps and g.rounds >= MIN_STEPS:
            e.append(ev.Evidence(f"made over {g.rounds} steps and freed together, long after their step ended",
                                 "cycles", first))
        e.append(ev.Evidence(f"freed at {where}, not where their scope ended", "cycles", first))
    elif g.relation == ev.SAME_LINE:
        g.cause, g.confidence = REFCOUNT, "medium"
        e.append(ev.Evidence(f"freed at {where}, the very line that made them, with nothing newer left alive: a"
                             " statement's temporaries, or a variable bound again", "not cycles", first))
    elif g.relation == ev.IN_LIBRARY:
        g.cause, g.confidence = REFCOUNT, "medium"
        e.append(ev.Evidence(f"freed inside library code ({where}), which dropped them", "not cycles", first))
    elif free_sid >= 0 and free_sid == alloc_sid:
        g.cause, g.confidence = UNKNOWN, "low"
        e.append(ev.Evidence("the frees carry their allocation's stack (recorded with context='alloc'): where"
                             " they were freed is not recorded", "cannot tell", first))
    else:
        g.cause, g.confidence = UNKNOWN, "low"
        e.append(ev.Evidence(f"freed at {where or 'a line not recorded'}: Python stacks alone cannot tell the"
                             " collector from a del or a container going away here (record with stacks='all')",
                             "cannot tell", first))
    if not g.native:
        e.append(ev.Evidence("no C++ frames on the frees (stacks='python'), so no frame names the mechanism",
                             "cannot tell", first))


def in_library(g: SiteGroup) -> bool:
    """Whether the group's frees ran inside library code: at the library line or in the library
    function that made them (a packed sequence's pieces), or in another of its functions
    (autocast's exit)."""
    if g.relation == ev.IN_LIBRARY:
        return True
    return g.relation in (ev.SAME_LINE, ev.SAME_FUNCTION) and g.free_frame is not None and \
        ev.is_library_frame(g.free_frame)


def _in_backward(snapshot: Snapshot, dev: DeviceModel, i: int) -> bool:
    context = stackless_context(snapshot, dev.device, i)
    return bool(context and context.in_backward)


def describe_group(g: SiteGroup, sites: CallSites) -> str:
    return (f"{format_bytes(g.bytes)} in {plural(len(g.lives), 'allocation')} from {sites.label(g.site)}:"
            f" {CAUSE_WORDS[g.cause]} ({g.confidence})")
