"""Where a row of an analysis screen leads in the event log.

Pure (no textual): an :class:`AnalysisJump` says which event to put the cursor on,
which events the log should list (a call site's allocations and frees) and which ones
``n``/``N`` step through.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.callsites import CallSites
from memtui.analysis.live import life_spans
from memtui.model import DeviceModel, Snapshot
from memtui.model.lifetimes import NONE
from memtui.units import plural


@dataclass
class AnalysisJump:
    event: int | None  # None: nowhere to go, ``message`` says why
    rows: np.ndarray | None = None  # events the log should list; None leaves the log unfiltered
    steps: np.ndarray | None = None  # events n/N step through
    label: str = ""  # what the filter or the steps are about
    message: str = ""


def event_jump(event: int, message: str = "") -> AnalysisJump:
    return AnalysisJump(int(event), message=message)


def site_jump(snapshot: Snapshot, dev: DeviceModel, label: str, depth: int = 1) -> AnalysisJump:
    """The allocations of one call site: the log lists their allocs and frees, the cursor
    goes to the latest allocation still live at the end (else the latest one)."""
    sites = CallSites(snapshot.stacks, depth)
    wanted = [s for s in range(len(sites)) if sites.label(s) == label]
    lives = dev.lives
    if not wanted or len(lives) == 0:
        return AnalysisJump(None, message=f"no allocation of {label} in the trace")
    spans = life_spans(dev)
    mine = np.nonzero(np.isin(sites.of_stacks(spans.stack[: len(lives)]), wanted))[0]
    events = np.concatenate([lives.start[mine], lives.request[mine], lives.end[mine]])
    events = np.unique(events[events != NONE]).astype(np.int64)
    allocs = np.sort(lives.start[mine][lives.start[mine] != NONE]).astype(np.int64)
    if not len(events):
        return AnalysisJump(None, message=f"{label}: its allocations are older than the trace")
    still_live = lives.start[mine][(lives.end[mine] == NONE) & (lives.start[mine] != NONE)]
    target = int(still_live.max()) if len(still_live) else int(allocs[-1]) if len(allocs) else int(events[-1])
    return AnalysisJump(target, rows=events, steps=allocs if len(allocs) else events, label=label,
                        message=f"{plural(len(allocs), 'allocation')} of {label} (n/N step through them)")
