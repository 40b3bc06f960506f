"""The watcher's copy of a job's memory, kept up to date one message at a time.

A ``state`` message sets it; each ``delta`` appends the new trace entries and annotations
and replaces the segments (the allocator's state now); ``counters`` extend the curves of
allocated and reserved memory, which grow at every tick even while the trace is read
seldom. :meth:`LiveState.raw_snapshot` gives what ``_snapshot()`` would: the explorer's
model is built from it like from a file.

The trace is kept to ``keep`` entries a device, oldest dropped first, as the job's own ring
buffer does.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
from dataclasses import dataclass, field

from memtui.live import protocol as p
from memtui.live import wire
from memtui.live.seen import seen_entries

DEFAULT_KEEP = 200_000
COUNTER_HISTORY = 36_000  # an hour at 10 ticks a second


@dataclass
class DeviceCounters:
    device: int
    allocated: int = 0
    reserved: int = 0
    active: int = 0
    peak_allocated: int = 0
    limit: int | None = None  # what the allocator may reach: its cap, else reserved + free on the device
    device_free: int | None = None
    device_total: int | None = None
    ooms: int = 0
    retries: int = 0

    @property
    def headroom(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.allocated)

    @property
    def used_share(self) -> float:
        if not self.limit:
            return math.nan
        return self.allocated / self.limit

    @classmethod
    def from_json(cls, data: dict) -> DeviceCounters:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class Sample:
    """Counters at one tick: the time (seconds since the epoch) and each device's figures."""

    t: float
    devices: list[DeviceCounters]


@dataclass
class LiveState:
    keep: int = DEFAULT_KEEP
    hello: dict = field(default_factory=dict)
    samples: collections.deque = field(default_factory=lambda: collections.deque(maxlen=COUNTER_HISTORY))
    segments: list = field(default_factory=list)
    traces: list = field(default_factory=list)  # one list of entries per device
    # The segments as the last state or trace read gave them: they and the trace are one
    # moment, what a saved state holds. ``segments`` may be newer (a segments read since).
    traced_segments: list = field(default_factory=list)
    # Per device: how the segments now differ from ``traced_segments`` (memtui.live.seen),
    # shown after the trace until the trace's own entries arrive; and when each was first seen.
    seen: dict = field(default_factory=dict)
    seen_times: dict = field(default_factory=dict)
    annotations: list = field(default_factory=list)
    allocator_settings: dict = field(default_factory=dict)
    steps: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))  # (n, time)
    ooms: list = field(default_factory=list)  # the oom messages, as received
    missed: int = 0  # updates dropped because this watcher fell behind
    gaps: int = 0  # times the job's ring buffer wrapped past what we had read
    trimmed: int = 0  # entries dropped here to stay within `keep`
    has_state: bool = False
    ended: bool = False
    bye: dict | None = None
    server: dict = field(default_factory=dict)  # the job's own account of what serving cost it
    frozen: dict = field(default_factory=dict)  # freeze id -> snapshot
    frames: list = field(default_factory=list)  # the job's frames by number (memtui.live.wire)
    version: int = 0  # bumped whenever the trace or the segments change
    last_update: float = 0.0  # time (job's clock) of the last message that changed anything
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # -- updates ---------------------------------------------------------------------------
    def apply(self, message: dict) -> None:
        kind = message.get("kind")
        with self.lock:
            t = message.get("t")
            if isinstance(t, (int, float)):
                self.last_update = float(t)
            if kind == p.HELLO:
                self.hello = message
            elif kind == p.COUNTERS:
                devices = [DeviceCounters.from_json(d) for d in message.get("devices") or []]
                self.samples.append(Sample(float(message.get("t", 0.0)), devices))
                self.server = message.get("server") or {}
            elif kind == p.STATE:
                self.frames = list(message.get("frames") or [])
                self._set_state(wire.unpack_snapshot(message.get("snapshot") or {}, self.frames))
            elif kind == p.DELTA:
                self._apply_delta(message)
            elif kind == p.STEP:
                self.steps.append((int(message.get("n", 0)), float(message.get("t", 0.0))))
            elif kind == p.OOM:
                self.ooms.append(message)
            elif kind == p.MISSED:
                self.missed += int(message.get("dropped", 0))
            elif kind == p.FROZEN:
                frozen = wire.unpack_snapshot(message.get("snapshot") or {}, message.get("frames") or [])
                self.frozen[int(message.get("id", 0))] = frozen
            elif kind == p.BYE:
                self.bye = message
                self.ended = True

    def _set_state(self, snapshot: dict) -> None:
        self.segments = list(snapshot.get("segments") or [])
        self.traces = [list(t or []) for t in snapshot.get("device_traces") or []]
        self.annotations = list(snapshot.get("external_annotations") or [])
        self.traced_segments = self.segments
        self.seen, self.seen_times = {}, {}
        self.allocator_settings = dict(snapshot.get("allocator_settings") or {})
        self.has_state = True
        self._trim()
        self.version += 1

    def _apply_delta(self, message: dict) -> None:
        if not self.has_state:
            return  # a delta without the state it continues cannot be placed
        if int(message.get("frames_from", len(self.frames))) != len(self.frames):
            self.gaps += 1  # frames we never got: the next state sets things right
            self.has_state = False
            return
        self.frames.extend(message.get("frames") or [])
        segments = wire.unpack_segments(list(message.get("segments") or []), self.frames)
        traced = bool(message.get("traces") or message.get("gap"))
        changed = bool(traced or message.get("annotations")) or segments != self.segments
        if traced:
            # The trace now holds what the segments showed, as recorded; a delta that carries
            # the trace carries the segments of the same read.
            self.traced_segments = segments
            self.seen, self.seen_times = {}, {}
        elif changed:
            self._see(segments, float(message.get("t", 0.0)))
        self.segments = segments
        for key, entries in (message.get("traces") or {}).items():
            d = int(key)
            while len(self.traces) <= d:
                self.traces.append([])
            self.traces[d].extend(wire.unpack_entries(entries, self.frames))
        self.annotations.extend(message.get("annotations") or [])
        if message.get("gap"):
            self.gaps += 1
        self._trim()
        if changed:
            self.version += 1

    def _see(self, segments: list, t: float) -> None:
        """``seen`` from the segments of the last trace read to ``segments``, each entry timed
        when a read first showed it."""
        times: dict = {}
        seen: dict = {}
        for device, entries in seen_entries(self.traced_segments, segments, t).items():
            for e in entries:
                key = (device, e["action"], e["addr"], e["size"])
                e["time_us"] = times[key] = self.seen_times.get(key, e["time_us"])
            entries.sort(key=lambda e: e["time_us"])  # stable: torch's order within a read
            seen[device] = entries
        self.seen, self.seen_times = seen, times

    def _trim(self) -> None:
        for trace in self.traces:
            extra = len(trace) - self.keep
            if extra > 0:
                del trace[:extra]
                self.trimmed += extra
        if len(self.annotations) > self.keep:
            del self.annotations[: len(self.annotations) - self.keep]

    def end(self, reason: str) -> None:
        """The connection closed without a goodbye (the job was killed, say)."""
        with self.lock:
            if not self.ended:
                self.bye = {"kind": p.BYE, "reason": reason}
                self.ended = True

    # -- reading -------------------------------------------------------------------------
    def raw_snapshot(self, with_seen: bool = False) -> dict:
        """The state as ``torch.cuda.memory._snapshot()`` lays it out (lists copied, entries
        shared): the trace with the segments of the same read (what torch recorded, what a
        saved state holds); ``with_seen``: with the segments now instead, and after each
        device's trace how they came to differ (for the view)."""
        with self.lock:
            traces = [list(t) for t in self.traces]
            if with_seen:
                for device, entries in self.seen.items():
                    while len(traces) <= device:
                        traces.append([])
                    traces[device].extend(entries)
            segments = self.segments if with_seen else self.traced_segments
            return {"segments": list(segments), "device_traces": traces,
                    "external_annotations": list(self.annotations),
                    "allocator_settings": dict(self.allocator_settings)}

    def latest(self) -> Sample | None:
        with self.lock:
            return self.samples[-1] if self.samples else None

    def curve(self, device: int, last: int | None = None) -> list[tuple[float, int, int]]:
        """(time, allocated, reserved) at each tick for ``device``, oldest first; only the
        ``last`` ticks when given (a view redrawn ten times a second needs no more than it shows)."""
        with self.lock:
            samples = self.samples if last is None else itertools.islice(reversed(self.samples), last)
            out = []
            for s in samples:
                for d in s.devices:
                    if d.device == device:
                        out.append((s.t, d.allocated, d.reserved))
            return out if last is None else out[::-1]

    def events(self) -> int:
        with self.lock:
            return sum(len(t) for t in self.traces)

    def seen_count(self) -> int:
        """Entries the segments showed since the last trace read (not yet recorded ones)."""
        with self.lock:
            return sum(len(t) for t in self.seen.values())
