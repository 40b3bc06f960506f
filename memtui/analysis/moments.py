"""A moment of a device's trace named as a user names it: ``peak``, ``end``, ``oom``
(``oom:N``), ``step:N`` (``step:last``) or an event number. ``breakdown --at`` and
``diff --at-a/--at-b`` read their moments here, so both take the same words and refuse
the same ones in the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.errors import UsageError
from memtui.model import DeviceModel, Snapshot
from memtui.model.snapshot import NOT_REPLAYED

MOMENT_WORDS = "peak, end, oom, oom:N, step:N, step:last or an event number"


@dataclass
class Moment:
    event: int  # the event the moment is after (-1: no trace event, the snapshot's own state)
    name: str  # what was asked for: "peak", "end", "oom", "step 3", "event"

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "moment": self.name}


def resolve_moment(snapshot: Snapshot, dev: DeviceModel, at: str, curve: Callable[[], np.ndarray],
                   flag: str = "--at") -> Moment:
    """The event ``at`` names: ``peak`` (allocated, from ``curve()``, asked for only then),
    ``end``, ``oom`` (the first; ``oom:N`` the N-th), ``step:N`` (the N-th step marker,
    ``step:last``), or an event number as the event log shows it. ``flag`` names the
    option in the one line that refuses it."""
    n = len(dev.trace)
    text = at.strip().lower()
    said = f"{flag} {at}"
    if not n:
        if text in ("end", "peak"):
            return Moment(-1, text)
        raise UsageError(f"{said}: this device has no trace events; only 'end' (the snapshot's state) exists")
    if dev.partial_trace:
        if text in ("end", "peak"):  # the file's own state, the source's end: its curve is that throughout
            return Moment(-1, "end")
        raise UsageError(f"{said}: {NOT_REPLAYED}; open the source snapshot for other moments")
    if text == "end":
        return Moment(n - 1, "end")
    if text == "peak":
        return Moment(int(np.argmax(curve())), "peak")
    if text == "oom" or text.startswith("oom:"):
        ooms = dev.oom_indices()
        k = _ordinal(text[4:], len(ooms), said) if ":" in text else 1
        if not len(ooms):
            raise UsageError(f"{flag} oom: no OOM in this device's trace")
        return Moment(int(ooms[k - 1]), f"oom {k}" if ":" in text else "oom")
    if text.startswith("step:"):
        from memtui.analysis.steps import step_boundaries

        found = step_boundaries(snapshot, dev)
        if found is None:
            raise UsageError(f"{said}: no step markers or repeated annotations in this trace")
        k = _ordinal(text[5:], len(found[1]), said)
        return Moment(int(found[1][k - 1]), f"step {k}")
    try:
        shown = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise UsageError(f"{said}: say {MOMENT_WORDS}") from None
    row = dev.row_of_shown_index(shown)
    if row is None:
        raise UsageError(f"{said}: no event {shown:,} on device {dev.device} (it has {n:,})")
    return Moment(row, "event")


def _ordinal(text: str, count: int, said: str) -> int:
    if text in ("last", "-1"):
        if not count:
            raise UsageError(f"{said}: there is none")
        return count
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"{said}: a number or 'last' after the colon") from None
    if not 1 <= k <= count:
        there = "there is only 1" if count == 1 else f"there are {count} (1 to {count})"
        raise UsageError(f"{said}: {there}")
    return k
