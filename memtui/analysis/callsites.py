"""Grouping allocations by call site.

A call site is the deepest user frame of an allocation's stack: the line in the user's
own code that led to the allocation, not the torch internals under it. With ``depth``
greater than one, the next user frames outward are part of the key, which separates
one line called from several places.

Which frames those are is the one rule of memtui/model/relevance.py: stacks with no user
frame fall back to their innermost Python frame (torch code), and stacks with only C++
frames (the autograd engine's threads) to the frame that names the operation.

Everything is computed once per distinct stack (a few hundred even in a million-event
trace); per-event work is one array lookup.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from memtui.model.frames import StackTable

NO_SITE = 0  # the site of allocations recorded without a stack

class CallSites:
    """Site ids for every stack of a snapshot, with labels and frames for each site."""

    def __init__(self, stacks: StackTable, depth: int = 1) -> None:
        self.stacks = stacks
        self.frames = stacks.frames
        self.depth = max(1, int(depth))
        self._keys: list[tuple[int, ...]] = [()]
        ids: dict[tuple[int, ...], int] = {(): NO_SITE}
        site_of_stack = np.zeros(len(stacks) + 1, np.int32)  # slot 0 is "no stack"
        for sid in range(len(stacks)):
            key = self._site_frames(sid)
            site = ids.get(key)
            if site is None:
                site = ids[key] = len(self._keys)
                self._keys.append(key)
            site_of_stack[sid + 1] = site
        self._site_of_stack = site_of_stack
        self._labels: list[str | None] = [None] * len(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def of_stacks(self, stack_ids: np.ndarray) -> np.ndarray:
        """Site id of each stack id (-1, no stack, gives NO_SITE)."""
        return self._site_of_stack[np.asarray(stack_ids, np.int64) + 1]

    def of_stack(self, stack_id: int) -> int:
        return int(self._site_of_stack[int(stack_id) + 1])

    def label(self, site: int) -> str:
        """``file:line function`` of the site; outer frames follow after ``<-``."""
        text = self._labels[site]
        if text is None:
            parts = [self._frame_text(f) for f in self._keys[site]]
            text = " <- ".join(parts) if parts else "(no stack)"
            self._labels[site] = text
        return text

    def frame_dicts(self, site: int) -> list[dict[str, Any]]:
        return [self.stacks.frame_dict(f) for f in self._keys[site]]

    def describe(self, site: int) -> dict[str, Any]:
        """The JSON form of a site: its label and its frames, innermost first."""
        return {"site": self.label(site), "frames": self.frame_dicts(site)}

    def _frame_text(self, fid: int) -> str:
        return self.frames.label_text(fid)

    def _site_frames(self, sid: int) -> tuple[int, ...]:
        return self.stacks.label_frames(sid, self.depth)


def group_by_site(sites: np.ndarray, sizes: np.ndarray, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, count) per site id for allocations with the given sites and sizes."""
    sites = np.asarray(sites, np.int64)
    count = np.bincount(sites, minlength=n_sites).astype(np.int64)
    total = np.bincount(sites, weights=np.asarray(sizes, np.float64), minlength=n_sites)
    with np.errstate(invalid="ignore"):  # sums past 2**63 (a file memtui check faults): no warning line
        return np.rint(total).astype(np.int64), count


class DescribedSites(Protocol):
    """Sites that can say what each is: CallSites, or AttributedSites (memtui/analysis/attribution.py)."""

    def __len__(self) -> int: ...

    def describe(self, site: int) -> dict[str, Any]: ...


def top_sites(site_ids: DescribedSites, sites: np.ndarray, sizes: np.ndarray, limit: int = 10) -> list[dict[str, Any]]:
    """The ``limit`` sites holding the most bytes, as JSON-ready dicts."""
    total, count = group_by_site(sites, sizes, len(site_ids))
    order = np.lexsort((-count, -total))
    out: list[dict[str, Any]] = []
    for site in order:
        if count[site] == 0 or len(out) >= limit:
            break
        out.append({**site_ids.describe(int(site)), "bytes": int(total[site]), "count": int(count[site])})
    return out
