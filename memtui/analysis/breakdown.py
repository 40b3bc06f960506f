"""Where the memory goes at one moment: allocated bytes per category, and who holds them.

A moment is "after event i". The allocations live then (the *live set*) come either from
the life spans (one pass over them: what a command does once) or from the replay's
allocator state at ``i`` (what the explorer already has at its cursor: no pass at all);
both give the same set. Each allocation carries the category decided once for the whole
trace (memtui/analysis/categories.py), so a breakdown is a sum per category of the live
set's bytes: every allocated byte in exactly one category. Reserved bytes that hold no
allocation are reported beside them (``cached_free``, and ``pending_free`` for blocks freed
by the program but still waiting on a stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.analysis.attribution import AUTOGRAD_SITE
from memtui.analysis.callsites import CallSites, group_by_site
from memtui.analysis.categories import VIA_BACKWARD_CALL, CategoryTable
from memtui.analysis.moments import Moment
from memtui.model import DeviceModel, Snapshot
from memtui.model.lifetimes import NONE
from memtui.model.relevance import is_native_frame, short_native_name
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.replay import AllocatorState

BACKWARD_PREFIX = "(backward) "


@dataclass
class LiveSet:
    """The allocated blocks at one moment, each with its category, rule and shown stack."""

    size: np.ndarray
    category: np.ndarray
    rule: np.ndarray
    stack: np.ndarray
    via_backward: np.ndarray
    pending_free: int = 0  # bytes freed by the program, still waiting on a stream

    def __len__(self) -> int:
        return len(self.size)

    @property
    def allocated(self) -> int:
        return int(self.size.sum())

    def per_category(self, n_categories: int) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, count) per category id."""
        total = np.bincount(self.category, weights=self.size, minlength=n_categories)
        count = np.bincount(self.category, minlength=n_categories)
        return np.rint(total).astype(np.int64), count.astype(np.int64)


def live_from_spans(table: CategoryTable, dev: DeviceModel, i: int) -> LiveSet:
    """The live set after event ``i`` by one pass over the life spans (``i = -1``: the
    snapshot's own blocks when the trace is empty)."""
    spans = table.spans
    if dev.partial_trace or not len(dev.trace):
        return live_from_blocks(table, dev)
    live = (spans.start <= i) & (spans.stop > i)
    lives = dev.lives
    n = len(dev.trace)
    end = np.where(lives.end == NONE, n, lives.end)
    request = np.where(lives.request == NONE, n, lives.request)
    pending = (request <= i) & (end > i)
    pending_bytes = int(spans.size[: table.n_lives][pending].sum())
    return LiveSet(spans.size[live], table.span_category[live], table.span_rule[live], table.span_stack[live],
                   table.span_via_backward[live], pending_bytes)


def live_from_blocks(table: CategoryTable, dev: DeviceModel) -> LiveSet:
    """The live set of the snapshot's own block table (its state at the dump)."""
    blocks = dev.blocks
    mine = blocks.state == ALLOCATED
    pending = int(blocks.size[blocks.state == PENDING_FREE].sum())
    return LiveSet(blocks.size[mine].astype(np.int64), table.block_category[mine], table.block_rule[mine],
                   table.block_stack[mine], table.block_via_backward[mine], pending)


def live_from_state(table: CategoryTable, state: AllocatorState) -> LiveSet:
    """The live set of a replayed :class:`memtui.replay.AllocatorState`: the blocks it
    already holds, looked up by life (or by snapshot block for memory older than the trace)."""
    allocated = state.blk_state == ALLOCATED
    life = state.blk_life[allocated]
    final = state.blk_final[allocated]
    traced = life != NONE
    life_row = np.maximum(life, 0)
    final_row = np.maximum(final, 0)

    def pick(by_life: np.ndarray, by_block: np.ndarray) -> np.ndarray:
        if not len(by_block):
            return by_life[life_row] if len(by_life) else np.zeros(len(life), by_life.dtype)
        return np.where(traced, by_life[life_row] if len(by_life) else 0, by_block[final_row])

    n = table.n_lives
    return LiveSet(
        state.blk_size[allocated].astype(np.int64),
        pick(table.span_category[:n], table.block_category),
        pick(table.span_rule[:n], table.block_rule),
        pick(table.span_stack[:n], table.block_stack),
        pick(table.span_via_backward[:n], table.block_via_backward),
        int(state.blk_size[state.blk_state != ALLOCATED].sum()),
    )


@dataclass
class Site:
    label: str
    frames: list[dict[str, Any]]
    bytes: int
    count: int
    categories: dict[str, int]  # bytes per category at this site
    short: str = ""  # the label with file names without their folders

    def to_json(self) -> dict[str, Any]:
        return {"site": self.label, "bytes": self.bytes, "count": self.count, "categories": self.categories,
                "frames": self.frames}


@dataclass
class Breakdown:
    device: int
    moment: Moment
    allocated: int
    reserved: int
    pending_free: int
    categories: dict[str, int]  # every category name, in order; values add up to allocated
    counts: dict[str, int]
    top_sites: dict[str, list[Site]]  # per category, largest first
    sites: list[Site]  # over all categories, largest first

    @property
    def cached_free(self) -> int:
        """Reserved bytes that hold no allocation (nor one waiting to be freed)."""
        return max(self.reserved - self.allocated - self.pending_free, 0)

    def to_json(self, by: str = "category") -> dict[str, Any]:
        out = {"device": self.device, "at": self.moment.to_json(), "allocated": self.allocated,
               "reserved": self.reserved, "cached_free": self.cached_free, "pending_free": self.pending_free,
               "categories": dict(self.categories), "counts": dict(self.counts)}
        if by == "site":
            out["sites"] = [s.to_json() for s in self.sites]
        else:
            out["sites"] = [{"category": name, **s.to_json()} for name in self.categories
                            for s in self.top_sites.get(name, [])]
        return out


def breakdown(snapshot: Snapshot, dev: DeviceModel, table: CategoryTable, live: LiveSet, moment: Moment,
              reserved: int, sites: CallSites | None = None, top: int = 5) -> Breakdown:
    """Bytes per category of ``live`` with the ``top`` call sites of each category and overall."""
    names = table.names
    total, count = live.per_category(len(names))
    sites = sites if sites is not None else CallSites(snapshot.stacks)
    site = sites.of_stacks(live.stack).astype(np.int64)
    # A site shown under a backward() call is not the same site as that call's own allocations.
    key = site * 3 + live.via_backward.astype(np.int64)
    keys, inverse = np.unique(key, return_inverse=True)
    by_key_cat = np.zeros((len(keys), len(names)), np.int64)
    np.add.at(by_key_cat, (inverse, live.category.astype(np.int64)), live.size)
    key_bytes, key_count = group_by_site(inverse, live.size, len(keys))

    def make(k: int) -> Site:
        s, via = divmod(int(keys[k]), 3)
        label, frames = sites.label(s), sites.frame_dicts(s)
        short = " <- ".join(_short_frame(f) for f in frames) or label
        if via == VIA_BACKWARD_CALL:
            label = AUTOGRAD_SITE.format(label)  # as every analysis names it (attribution.py)
            short = f"{BACKWARD_PREFIX}under {short}"
        # VIA_FORWARD: forward_frames read "file:line function (backward)" already.
        mix = {names[c]: int(by_key_cat[k, c]) for c in range(len(names)) if by_key_cat[k, c]}
        return Site(label, frames, int(key_bytes[k]), int(key_count[k]), mix, short)

    order = np.lexsort((-key_count, -key_bytes))
    overall = [make(int(k)) for k in order[:top] if key_count[k]]
    per_category: dict[str, list[Site]] = {}
    for c, name in enumerate(names):
        column = by_key_cat[:, c]
        ranked = [int(k) for k in np.argsort(-column, kind="stable")[:top] if column[k] > 0]
        if ranked:
            made = [make(k) for k in ranked]
            for s, k in zip(made, ranked):  # within one category: that category's bytes and count
                s.bytes = int(column[k])
                s.count = int(np.count_nonzero((inverse == k) & (live.category == c)))
            per_category[name] = made
    return Breakdown(dev.device, moment, live.allocated, int(reserved), live.pending_free,
                     {name: int(total[c]) for c, name in enumerate(names)},
                     {name: int(count[c]) for c, name in enumerate(names)}, per_category, overall)


def unknown_note(result: Breakdown) -> str | None:
    """Why some memory is `unknown`, true of every row that holds some: rows without a
    stack, and rows with one that no rule places (a trace that keeps no stacks for its
    events, a thread without Python frames outside backward())."""
    rows = [site for site in result.sites if site.categories.get("unknown")]
    if not result.categories.get("unknown"):
        return None
    # Rows past the top ones shown are not known here: then both reasons are given.
    stackless = any(site.label == "(no stack)" for site in rows) or not rows
    stacked = any(site.label != "(no stack)" for site in rows) or not rows
    reasons = (["recorded without a stack"] if stackless else []) + (
        ["with a stack that no rule places (the trace keeps no stack for when it was made and freed, or a thread"
         " without Python frames outside backward())"] if stacked else [])
    return ("unknown: allocations " + ", or ".join(reasons) + " (see the Categories section of"
            " docs/analyses.md)")


def _short_frame(frame: dict[str, Any]) -> str:
    filename, name = frame["filename"], frame["name"]
    if is_native_frame(filename):
        return f"{short_native_name(name)} [C++]"
    return f"{filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{frame['line']} {name}"


@dataclass
class StepPeak:
    step: int  # 1-based
    first: int  # the step's first event
    last: int  # its last event (the marker)
    peak: int  # where allocated memory peaks inside it


def step_peaks(snapshot: Snapshot, dev: DeviceModel, curve: np.ndarray) -> tuple[str, list[StepPeak]] | None:
    """Each step's window (from the event after one step marker to the next marker) and the
    event where allocated memory peaks in it; None without markers."""
    from memtui.analysis.categories import annotation_spans
    from memtui.analysis.steps import step_boundaries

    found = step_boundaries(snapshot, dev)
    if found is None:
        spans = annotation_spans(snapshot, dev, "Optimizer.step#")
        if not spans:
            return None
        found = ("Optimizer.step", np.array(sorted(hi for _, hi in spans), np.int64))
    name, marks = found
    out = []
    first = 0
    for k, last in enumerate(marks, 1):
        last = int(last)
        if last < first:
            continue
        peak = first + int(np.argmax(curve[first:last + 1]))
        out.append(StepPeak(k, first, last, peak))
        first = last + 1
    return name, out


def category_values_at(table: CategoryTable, dev: DeviceModel, points: np.ndarray) -> np.ndarray:
    """Allocated bytes per category after each of the sorted event indices ``points``:
    an array (categories, points), from one pass over the life spans (a stacked timeline
    asks once per redraw of its columns, never per cursor move)."""
    points = np.asarray(points, np.int64)
    n_cat = len(table.names)
    if dev.partial_trace or not len(dev.trace):
        total, _ = live_from_blocks(table, dev).per_category(n_cat)
        return np.repeat(total[:, None], len(points), axis=1)
    spans = table.spans
    first, last = spans.live_at(points)
    k = len(points) + 1
    category = table.span_category.astype(np.int64)
    delta = np.bincount(category * k + first, weights=spans.size, minlength=n_cat * k)
    delta -= np.bincount(category * k + last, weights=spans.size, minlength=n_cat * k)
    return np.rint(np.cumsum(delta.reshape(n_cat, k), axis=1)[:, :-1]).astype(np.int64)
