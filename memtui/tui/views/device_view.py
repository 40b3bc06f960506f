"""What the explorer needs per device, computed once in a worker: replay, memory curves, annotations.

Pure numpy: no textual import, so it can be built in a thread and tested alone.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from memtui.analysis.curve_extremes import CurveExtremes
from memtui.analysis.live import allocated_curve, reserved_curve
from memtui.cache.index_store import load_index, store_index_later
from memtui.cache.store import ModelCache
from memtui.cores import spare_cores
from memtui.model import DeviceModel, Snapshot
from memtui.model.snapshot import annotation_fields
from memtui.replay import Replayer


@dataclass
class AnnotationMarks:
    """Annotation starts placed on the event axis (an annotation has a time, events have times)."""

    event: np.ndarray  # event index at or after each START
    end_event: np.ndarray  # event index of the matching END (or the last event)
    names: list[str]

    def active_at(self, i: int) -> str:
        """Name of the innermost annotation span containing event ``i`` ('' if none)."""
        if not len(self.event):
            return ""
        hits = np.nonzero((self.event <= i) & (self.end_event >= i))[0]
        return self.names[int(hits[-1])] if len(hits) else ""


@dataclass
class DeviceView:
    """One device of a snapshot, ready to be explored."""

    snapshot: Snapshot
    device: DeviceModel
    replayer: Replayer
    allocated: np.ndarray  # allocated bytes after each event (int64)
    reserved: np.ndarray  # reserved bytes after each event
    t0: float  # time of the first event with a time, for relative times
    annotations: AnnotationMarks
    # The model cache and the snapshot's file, where the replayer's indexes are kept from one
    # open to the next (memtui/cache/index_store.py); None: built each time.
    kept_with: tuple[ModelCache, str | os.PathLike] | None = None
    # The curves' blocks' extremes as an earlier open kept them (memtui/cache/curves.py);
    # None: made from the curves when first asked for.
    kept_extremes: tuple[CurveExtremes, CurveExtremes] | None = None
    # One thread at a time makes the indexes: a second worker for the same view (the device
    # shown again before the first was done) waits, then finds them made.
    _indexing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def index_replayer(self) -> None:
        """The time-travel indexes, read where an earlier open kept them, else built and kept."""
        with self._indexing:
            if self.replayer.indexed:
                return
            if self.kept_with is not None and load_index(*self.kept_with, self.device.device, self.replayer):
                return
            self.replayer.build_indexes()
            if self.kept_with is not None:
                store_index_later(*self.kept_with, self.device.device, self.replayer)

    @property
    def n_events(self) -> int:
        return len(self.device.trace)

    # Made once, off the thread that draws (memtui/tui/views/first_view.py): the timeline reads
    # its columns from them, and the legend its peaks on every cursor move.
    @cached_property
    def allocated_extremes(self) -> CurveExtremes:
        return self.kept_extremes[0] if self.kept_extremes is not None else CurveExtremes.of(self.allocated)

    @cached_property
    def reserved_extremes(self) -> CurveExtremes:
        return self.kept_extremes[1] if self.kept_extremes is not None else CurveExtremes.of(self.reserved)

    @property
    def peak_allocated(self) -> int:
        peak = self.allocated_extremes.peak
        return peak if peak is not None else self.device.allocated

    @property
    def peak_reserved(self) -> int:
        peak = self.reserved_extremes.peak
        return peak if peak is not None else self.device.reserved

    def relative_seconds(self, i: int) -> float:
        t = float(self.device.trace.time_us[i])
        return (t - self.t0) / 1e6 if math.isfinite(t) and math.isfinite(self.t0) else math.nan


def build_device_view(snapshot: Snapshot, d: int,
                      curves: tuple[CurveExtremes, CurveExtremes] | None = None) -> DeviceView:
    """The view of device ``d``; ``curves``: its allocated and reserved curves with their
    extremes where they were kept from an earlier open (memtui.cache.curves), else computed."""
    device = snapshot.devices[d]
    # The interval indexes are left to a worker after the first screen (see
    # MainScreen._index_view): until they are built, a state is found by one pass over the
    # lives, which the end state shown first needs anyway.
    replayer = Replayer(device, indexed=False)
    if curves is not None:
        allocated, reserved = curves[0].curve, curves[1].curve
    else:
        # Made beside the main thread's own work (Textual's import, the first screen): a core is
        # left to it, as to the imports beside a kept model's checks (cache/check_ahead.py).
        allocated = allocated_curve(device, life_bytes=replayer.life_bytes,  # block sizes worked out once
                                    threads=spare_cores())
        reserved = reserved_curve(device, threads=spare_cores())
    t0 = device.time_origin_us
    return DeviceView(snapshot, device, replayer, allocated, reserved, t0, _annotation_marks(snapshot, device),
                      kept_extremes=curves)


def _finite_and_ordered(times: np.ndarray) -> bool:
    """Whether every time is finite and none is before the one before it: one pass, compared
    in place (np.diff would copy the times, 80 MB at 10M events). A NaN fails the comparison,
    and with the ends finite an ordered column has no infinity between them."""
    return bool(np.isfinite(times[0]) and np.isfinite(times[-1]) and np.greater_equal(times[1:], times[:-1]).all())


def _annotation_marks(snapshot: Snapshot, device: DeviceModel) -> AnnotationMarks:
    times = device.trace.time_us
    n = len(times)
    empty = AnnotationMarks(np.zeros(0, np.int64), np.zeros(0, np.int64), [])
    starts: list[tuple[float, str]] = []
    ends: dict[str, list[float]] = {}
    for on, stage, name, time_us in annotation_fields(snapshot.annotations):
        if on != device.device or not math.isfinite(time_us):
            continue
        if stage == "START":
            starts.append((time_us, name))
        elif stage == "END":
            ends.setdefault(name, []).append(time_us)
    if not starts or not n or not _finite_and_ordered(times):
        return empty  # without ordered times, annotations cannot be placed among events
    start_t = np.array([t for t, _ in starts])
    end_t = np.full(len(starts), np.inf)
    by_name: dict[str, list[int]] = {}
    for k, (_, name) in enumerate(starts):
        by_name.setdefault(name, []).append(k)
    for name, ks in by_name.items():  # each START closes at the first END of the same name after it
        closes = np.sort(np.asarray(ends.get(name, []), float))
        rows = np.asarray(ks, np.int64)
        pos = np.searchsorted(closes, start_t[rows], "left")
        closed = pos < len(closes)
        end_t[rows[closed]] = closes[pos[closed]]
    event = np.searchsorted(times, start_t, "left").astype(np.int64)
    end_event = np.minimum(np.searchsorted(times, end_t, "right") - 1, n - 1).astype(np.int64)
    return AnnotationMarks(event, end_event, [name for _, name in starts])

