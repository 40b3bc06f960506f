"""What a device's trace can tell, read once for every analysis that gives a verdict.

``oom``, ``leaks``, ``cycles`` and ``breakdown`` answer different questions about the same
events. Where their answers touch (a burst of frees after an OOM that one calls an
exception's traceback let go and another would count as memory held to the end; the
steps one samples by and another cuts at), they must rest on the same reading, or the
same file gets two stories. This module is that reading:

* whether there is a trace at all: a dump taken without recording history (or with
  ``enabled="state"``) holds the blocks live at the dump and no events, so nothing about
  time (growth, bursts, what came before an OOM) can be told, and every verdict about
  time says ``cannot tell`` with this reason;
* what the stacks carry (``all``: C++ frames too, ``python``, ``none``), and whether the
  frees carry stacks of their own: recorded with ``context="alloc"``, torch gives every
  free the stack its block was allocated with, so where (and why) memory was freed is
  not recorded;
* the steps (:mod:`memtui.analysis.steps`);
* the bursts of frees and the cause of each (:mod:`memtui.analysis.bursts`), and for every
  life the cause of the burst that freed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis import bursts as bu
from memtui.analysis import evidence as ev
from memtui.analysis.callsites import CallSites
from memtui.analysis.live import LifeSpans, life_spans
from memtui.analysis.steps import iteration_marks, step_boundaries
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act

NO_TRACE = ("there is no trace of allocations and frees on this device (history was not recorded, as with"
            " enabled='state', or nothing was allocated on it while it was): the file holds what was live at the"
            " dump, and nothing about time can be told")
CAUSES = tuple(bu.CAUSE_WORDS)


@dataclass
class TraceEvidence:
    device: int
    traced: bool  # the trace holds allocations or frees
    stacks: str  # "all", "python" or "none"
    steps: tuple[str, np.ndarray] | None  # step annotations: name and the event of each
    spans: LifeSpans
    life_site: np.ndarray  # call site of every traced life (CallSites at depth 1 unless asked)
    sites: CallSites
    releases: ev.FreeStacks
    bursts: list[bu.FreeBurst]
    freed_by: np.ndarray  # per traced life: index into CAUSES of the burst group that freed it, -1 none
    rounds: np.ndarray  # per event: the iteration (step) an allocation made there belongs to
    free_stacks: bool = True  # frees carry their own stacks, not their allocation's (context="alloc")

    @property
    def no_trace_reason(self) -> str | None:
        return None if self.traced else NO_TRACE

    def freed_by_cause(self, lives: np.ndarray, cause: str) -> np.ndarray:
        """Mask over ``lives`` (indices into the spans): freed in a burst of that cause."""
        lives = np.asarray(lives, np.int64)
        inside = lives < len(self.freed_by)
        out = np.zeros(len(lives), bool)
        out[inside] = self.freed_by[lives[inside]] == CAUSES.index(cause)
        return out


def trace_evidence(snapshot: Snapshot, dev: DeviceModel, depth: int = 1) -> TraceEvidence:
    trace = dev.trace
    sites = CallSites(snapshot.stacks, depth)
    spans = life_spans(dev)
    n_lives = len(dev.lives)
    life_site = sites.of_stacks(spans.stack[:n_lives]).astype(np.int64)
    steps = step_boundaries(snapshot, dev)
    releases = ev.FreeStacks(snapshot.stacks)
    traced = has_trace(dev)
    found: list[bu.FreeBurst] = []
    rounds_of = rounds(len(trace), steps or _iterations(snapshot, dev)) if traced else np.zeros(len(trace), np.int64)
    own = frees_have_own_stacks(dev, spans)
    if traced and n_lives:
        found = bu.find_bursts(snapshot, dev, spans, life_site, rounds_of, releases, steps is not None, own)
    freed_by = np.full(n_lives, -1, np.int64)
    for b in found:
        for g in b.groups:
            freed_by[g.lives] = CAUSES.index(g.cause)
    return TraceEvidence(dev.device, traced, stacks_recorded(dev, releases), steps, spans, life_site, sites,
                         releases, found, freed_by, rounds_of, own)


def frees_have_own_stacks(dev: DeviceModel, spans: LifeSpans) -> bool:
    """False when every free with a stack (at least ``bu.MIN_BURST`` of them) carries exactly
    its allocation's stack, as torch writes them under ``context="alloc"``. With
    ``context="all"`` some frees always happen elsewhere than their allocation (a whole
    trace of frees at the very statement that made them is no trace worth reading by
    free stacks either)."""
    n_lives = len(dev.lives)
    start, stop = spans.start[:n_lives], spans.stop[:n_lives]
    freed = (start >= 0) & (stop < len(dev.trace))
    free_sid = dev.trace.stack[stop[freed]].astype(np.int64)
    alloc_sid = spans.stack[:n_lives][freed].astype(np.int64)
    with_stack = free_sid >= 0
    if int(with_stack.sum()) < bu.MIN_BURST:
        return True
    return not bool(np.all(free_sid[with_stack] == alloc_sid[with_stack]))


def has_trace(dev: DeviceModel) -> bool:
    """Whether the device's trace holds allocations or frees (not only the dump's entry)."""
    return bool(len(dev.trace)) and bool(np.isin(dev.trace.action, act.BLOCK_ACTIONS).any())


def stacks_recorded(dev: DeviceModel, releases: ev.FreeStacks) -> str:
    """``all`` when the trace's stacks have C++ frames, ``python`` when they have only
    Python ones, ``none`` when nothing has a stack."""
    stacks = np.unique(dev.trace.stack[dev.trace.stack >= 0])
    if not len(stacks):
        return "none"
    return "all" if releases.has_native(stacks).any() else "python"


def rounds(n: int, marks: tuple[str, np.ndarray] | None) -> np.ndarray:
    """For every event, the iteration an allocation made there belongs to: its step when
    annotations mark steps, else its return to the loop's statement (steps.py); all one
    when the trace shows no iterations."""
    if marks is None:
        return np.zeros(n, np.int64)
    return np.searchsorted(marks[1], np.arange(n), "left")


def _iterations(snapshot: Snapshot, dev: DeviceModel) -> tuple[str, np.ndarray] | None:
    found = iteration_marks(snapshot, dev)
    if found is None:
        return None
    # A mark at event 0 is an iteration starting with the trace (nothing before it to part).
    marks = found[2][found[2] > 0] if len(found[2]) and found[2][0] == 0 and dev.trace.action[0] == act.ALLOC \
        else found[2]
    return found[1], marks
