"""What narrows the explorer's event log: nothing, a filter, or one call site of an analysis.

One value, held by the main screen and changed only through ``MainScreen.set_scope``,
which shows it everywhere at once: the log's rows and title, the filter's marks on the
timeline and the segment map, and the events n/N step through. The filter, the analysis
keys and the export take the value as it is; none of them keeps a copy of the others'.

Pure (numpy, no textual): a filter's scope is computed in a worker by :func:`filter_scope`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import Snapshot


@dataclass(frozen=True, eq=False)
class All:
    """Every event of the device."""

    rows = None
    marks = None
    matched_lives = None

    @property
    def title(self) -> str:
        return "Events"


@dataclass(frozen=True, eq=False)
class Filter:
    """The events matching a filter expression (docs/filter.md), computed on one device."""

    text: str
    device: int
    rows: np.ndarray  # matching trace indices, ascending
    matched_lives: np.ndarray  # per block life of the device: does any of its events match
    total: int  # events in the device's trace

    @property
    def marks(self) -> np.ndarray:
        """The events the timeline marks under its axis."""
        return self.rows

    @property
    def title(self) -> str:
        return f"Events: {len(self.rows):,} of {self.total:,} · {self.text}"


@dataclass(frozen=True, eq=False)
class Site:
    """A call site's allocations and frees, chosen in an analysis screen."""

    label: str
    rows: np.ndarray  # its events, ascending
    steps: np.ndarray  # the events n/N step through (its allocations)
    message: str = ""  # what n/N say about the steps
    marks = None
    matched_lives = None

    @property
    def title(self) -> str:
        return f"Events of {self.label}"


LogScope = All | Filter | Site
ALL = All()


def filter_scope(snapshot: Snapshot, device: int, text: str) -> Filter:
    """The events of ``device`` matching ``text``; raises :class:`memtui.query.FilterError`."""
    from memtui.query import compile_filter  # (the filter language: imported when first used)

    rows = compile_filter(text).indices(snapshot, device)
    dev = snapshot.devices[device]
    matched = np.zeros(len(dev.lives) + 1, bool)
    matched[dev.lives.event_life[rows]] = True  # -1 (no life) lands in the extra last slot
    return Filter(text, device, rows, matched[:-1], len(dev.trace))
