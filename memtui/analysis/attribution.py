"""The call site memory made without a stack is attributed to: one rule for every analysis.

torch's autograd engine runs backward on threads of its own, with no Python frames, so what
it allocates has an empty stack. The main thread is then inside ``loss.backward()``, and its
last event with a stack names that call (memtui/model/stackless.py). So memory made on the
autograd thread gets a site of its own for each ``backward()`` line it ran under,
``(autograd thread) under backward() at file:line function``, and ``leaks``, ``oom`` and
``top`` all say so; the explorer's inspector and ``events`` say the same of the event
(``stackless_context``). Memory without a stack made elsewhere stays ``(no stack)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.analysis.callsites import CallSites, top_sites
from memtui.model import DeviceModel, Snapshot
from memtui.model.lifetimes import NONE
from memtui.model.stackless import stackless_context

AUTOGRAD_SITE = "(autograd thread) under backward() at {}"


@dataclass(frozen=True)
class AttributedSites:
    """The call site of each item (an allocation), and every site's label: ``sites``' own,
    then, numbered ``len(sites) + s``, memory made on the autograd thread under backward()
    called at site ``s``."""

    sites: CallSites
    of_item: np.ndarray  # int64 site id of each item
    labels: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def label(self, site: int) -> str:
        return self.labels[site]

    def frames(self, site: int) -> list[dict[str, Any]]:
        """The frames of the site, innermost first (for memory made in backward: of the line
        that called backward())."""
        return self.sites.frame_dicts(site if site < len(self.sites) else site - len(self.sites))

    def describe(self, site: int) -> dict[str, Any]:
        """The JSON form of a site: its label and its frames (CallSites.describe)."""
        return {"site": self.label(site), "frames": self.frames(site)}

    def top(self, sizes: np.ndarray, limit: int = 10) -> list[dict[str, Any]]:
        """The ``limit`` sites holding the most bytes of the items, as JSON-ready dicts."""
        return top_sites(self, self.of_item, sizes, limit)


def attribute(snapshot: Snapshot, dev: DeviceModel, sites: CallSites, stacks: np.ndarray,
              starts: np.ndarray) -> AttributedSites:
    """The sites of items whose stack is ``stacks[k]`` (-1: none) and which the trace made at
    event ``starts[k]`` (NONE or negative: not from the trace)."""
    stacks = np.asarray(stacks, np.int64)
    starts = np.asarray(starts, np.int64)
    site_of_item = sites.of_stacks(stacks).astype(np.int64)
    labels = [sites.label(s) for s in range(len(sites))]
    stackless = np.flatnonzero((stacks < 0) & (starts >= 0) & (starts != NONE))
    if not len(stackless) or not len(dev.trace):
        return AttributedSites(sites, site_of_item, labels)
    before = dev.last_stacked_before[starts[stackless]]
    has = before >= 0
    if not has.any():
        return AttributedSites(sites, site_of_item, labels)
    stacks_before = np.full(len(before), -1, np.int64)
    stacks_before[has] = dev.trace.stack[before[has]]
    in_backward: set[int] = set()  # the sites whose line called backward()
    for sid in np.unique(stacks_before[stacks_before >= 0]).tolist():
        i = int(before[np.flatnonzero(stacks_before == sid)[0]])
        # The context of the first event without a stack after ``i`` says if ``i`` entered backward().
        context = stackless_context(snapshot, dev.device, _first_stackless_after(dev, i))
        if context is not None and context.in_backward:
            in_backward.add(sites.of_stack(sid))
    if not in_backward:
        return AttributedSites(sites, site_of_item, labels)
    labels = labels + [AUTOGRAD_SITE.format(sites.label(s)) for s in range(len(sites))]
    for k, sid in enumerate(stacks_before.tolist()):
        if sid >= 0 and (user := sites.of_stack(sid)) in in_backward:
            site_of_item[stackless[k]] = len(sites) + user
    return AttributedSites(sites, site_of_item, labels)


def _first_stackless_after(dev: DeviceModel, i: int) -> int:
    after = np.flatnonzero(dev.trace.stack[i + 1:] < 0)
    return i + 1 + int(after[0]) if len(after) else i


def block_starts(dev: DeviceModel, lives: np.ndarray) -> np.ndarray:
    """The event that made each of these lives (NONE where the life is NONE)."""
    lives = np.asarray(lives, np.int64)
    starts = np.full(len(lives), NONE, np.int64)
    known = lives != NONE
    starts[known] = dev.lives.start[lives[known]]
    return starts
