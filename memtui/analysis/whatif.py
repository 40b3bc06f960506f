"""What if the allocator had been set differently? The recording's requests, replayed.

The request stream (analysis/whatif_requests.py) goes through the allocator model
(memtui/allocator) once under the recorded settings with the recorded device's refusals,
to check the model against the recording (fidelity: the same segment events in the same
order with the same sizes), and then under each setting asked about, under one memory
limit: the ``--cap`` given, else the one the recorded OOM implies, else none.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from memtui.allocator.replay import Outcome, Requests, replay
from memtui.allocator.settings import AllocatorSettings, parse_conf, settings_of_snapshot
from memtui.allocator.simulator import allocation_size, round_size
from memtui.analysis.whatif_requests import build_requests, recorded_reserved, recorded_segment_events
from memtui.errors import UsageError
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.snapshot import NOT_REPLAYED
from memtui.units import format_bytes as format_size

ProgressFn = Callable[[str, int, int], None]
SEGMENT_NAMES = {act.SEGMENT_ALLOC: "segment_alloc", act.SEGMENT_FREE: "segment_free",
                 act.SEGMENT_MAP: "segment_map", act.SEGMENT_UNMAP: "segment_unmap"}
# The smallest-cap search stops when the bracket is this narrow (a share of the cap, or 2 MiB).
CAP_PRECISION = 0.005
CAP_STEP = 2 << 20
# Completing under a cap is not always monotonic in the cap: under a lower one the allocator
# frees its cache to retry at other moments, and the layout that follows can fit where a
# higher cap's does not (seen on GPU re-runs, docs/whatif.md). So the bisection's answer is
# checked at caps just above it, this many, CAP_PRECISION apart; a failure there moves the
# answer above it.
ABOVE_PROBES = 8


@dataclass
class Fidelity:
    checked: bool
    exact: bool
    segment_events: int
    matched: int
    first_difference: dict[str, Any] | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "exact": self.exact, "segment_events": self.segment_events,
                "matched": self.matched, "first_difference": self.first_difference, "note": self.note}


@dataclass
class Limit:
    """The memory limit the scenarios run under."""

    bytes: int | None
    per_process: bool
    source: str  # "given", "process cap", "device", "none"
    note: str = ""
    # A per-process cap is known only between the most the recording reserved and what its
    # OOM asked for: ``bytes`` is the middle; answers are checked at both ends too.
    low: int | None = None
    high: int | None = None

    def ends(self) -> list[int]:
        return [x for x in (self.low, self.high) if x is not None and x != self.bytes]


@dataclass
class Scenario:
    settings: str
    reserved_peak: int
    peak_event: int
    fragmentation_at_peak: int  # reserved minus active at the peak
    oom_event: int | None
    passes_recorded_oom: bool | None
    min_cap_bytes: int | None
    stopped_at: int | None
    retries: int
    recorded: bool = False
    passes_at_cap_ends: list[bool | None] = field(default_factory=list)
    # A lower cap that also completes, where completing is not monotonic in the cap (a cap
    # between it and min_cap_bytes runs out); None where no such cap was found.
    min_cap_lowest_bytes: int | None = None

    @property
    def passes_certain(self) -> bool:
        return len(set(self.passes_at_cap_ends + [self.passes_recorded_oom])) == 1

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "reserved_peak": self.reserved_peak, "oom_event": self.oom_event,
                "passes_recorded_oom": self.passes_recorded_oom, "min_cap_bytes": self.min_cap_bytes,
                "peak_event": self.peak_event, "fragmentation_at_peak": self.fragmentation_at_peak,
                "stopped_at": self.stopped_at, "alloc_retries": self.retries, "recorded": self.recorded,
                "passes_recorded_oom_at_cap_ends": self.passes_at_cap_ends,
                "passes_recorded_oom_certain": self.passes_certain,
                "min_cap_lowest_bytes": self.min_cap_lowest_bytes}


@dataclass
class WhatIf:
    device: int
    recorded_settings: str
    recorded_peak: int
    recorded_oom: int | None
    limit: Limit
    fidelity: Fidelity
    scenarios: list[Scenario] = field(default_factory=list)  # ranked, best first
    advice: str = ""
    # The trace starts mid-run: the replay starts from the layout the recorded allocator had made.
    starts_mid_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "recorded": {"settings": self.recorded_settings, "reserved_peak": self.recorded_peak,
                         "oom_event": self.recorded_oom, "cap_bytes": self.limit.bytes,
                         "cap_source": self.limit.source, "cap_note": self.limit.note,
                         "starts_mid_run": self.starts_mid_run},
            "fidelity": self.fidelity.to_json(),
            "scenarios": [s.to_json() for s in self.scenarios],
            "advice": self.advice,
            "after_recorded_oom": "unknown: the recording ends at its OOM or goes on without that request",
        }


def candidates(recorded_conf: str, recorded: AllocatorSettings, limit: Limit) -> list[str]:
    """Settings worth trying when none are asked for."""
    out = [recorded_conf or "default"]
    if recorded != AllocatorSettings():
        out.append("default")
    if not recorded.expandable_segments:
        out.append("expandable_segments:True")
    out += ["max_split_size_mb:64", "max_split_size_mb:256", "roundup_power2_divisions:4"]
    if limit.bytes is not None:
        out.append("garbage_collection_threshold:0.8")
        out.append("garbage_collection_threshold:0.6,max_split_size_mb:128")
    return list(dict.fromkeys(out))


def what_if(snapshot: Snapshot, device: int, confs: list[str] | None = None, cap: int | None = None,
            progress: ProgressFn | None = None, workers: int | None = None, min_cap: bool = True) -> WhatIf:
    """Replay the device's requests under each of ``confs`` (None: the candidates)."""
    dev = snapshot.device(device)
    if dev.partial_trace:
        raise UsageError(f"whatif: {NOT_REPLAYED}; replay the source snapshot")
    recorded_conf, recorded = settings_of_snapshot(snapshot.allocator_settings)
    requests = build_requests(dev)
    reserved = recorded_reserved(dev, requests)
    limit = derive_limit(dev, requests, cap, recorded, reserved)
    fidelity = check_fidelity(dev, requests, recorded)
    given = [c.strip() for c in confs] if confs else candidates(recorded_conf, recorded, limit)
    parsed = [(text, parse_conf(text)) for text in given]  # bad settings fail before any work
    recorded_peak = recorded_reserved_peak(dev, requests, reserved)
    ooms = dev.oom_indices()
    result = WhatIf(device, recorded_conf, recorded_peak, int(ooms[0]) if len(ooms) else None, limit, fidelity,
                    starts_mid_run=bool(requests.initial))
    jobs = [(text, settings, limit, settings == recorded, min_cap) for text, settings in parsed]
    result.scenarios = _run_all(requests, jobs, progress, workers)
    result.scenarios.sort(key=_rank)
    result.advice = advice(result)
    return result


# Several settings run in worker processes, each handed the requests once.
PARALLEL_FROM = 200_000  # requests; below this a worker costs more than it saves
_worker_requests: Requests | None = None
# One setting to run: its text, the settings, the limit, whether it is the recorded one, min_cap.
Job = tuple[str, AllocatorSettings, Limit, bool, bool]


def _run_all(requests: Requests, jobs: list[Job], progress: ProgressFn | None, workers: int | None) -> list[Scenario]:
    total = len(jobs)
    if progress:
        progress("what-if", 0, total)
    workers = workers if workers is not None else min(total, os.cpu_count() or 1)
    out: list[Scenario] = []
    if workers > 1 and total > 1 and len(requests) >= PARALLEL_FROM:
        with ProcessPoolExecutor(workers, initializer=_take_requests, initargs=(requests,)) as pool:
            for done, scenario in enumerate(pool.map(_scenario_job, jobs), 1):
                out.append(scenario)
                if progress:
                    progress("what-if", done, total)
        return out
    for done, job in enumerate(jobs, 1):
        out.append(run_scenario(requests, *job))
        if progress:
            progress("what-if", done, total)
    return out


def _take_requests(requests: Requests) -> None:
    global _worker_requests
    _worker_requests = requests


def _scenario_job(job: Job) -> Scenario:
    # The pool's initializer (_take_requests) set the requests before any job runs.
    return run_scenario(cast(Requests, _worker_requests), *job)


def run_scenario(requests: Requests, text: str, settings: AllocatorSettings, limit: Limit, is_recorded: bool,
                 min_cap: bool = True) -> Scenario:
    out = replay(requests, settings, limit=limit.bytes, per_process=limit.per_process)
    passes = _passes(requests, out)
    first_oom = requests.first_oom_event
    at_ends = []
    if first_oom is not None:
        at_ends = [_passes(requests, replay(requests, settings, limit=end, per_process=limit.per_process,
                                            until_event=first_oom)) for end in limit.ends()]
    uncapped = out if limit.bytes is None else replay(requests, settings)
    smallest, lowest = smallest_cap(requests, settings, uncapped) if min_cap else (None, None)
    return Scenario(text, out.reserved_peak, out.peak_event, out.reserved_peak - out.active_at_peak, out.oom_event,
                    passes, smallest, out.stopped_at, out.retries, is_recorded, at_ends, lowest)


def _passes(requests: Requests, out: Outcome) -> bool | None:
    """Whether the replay served the request the recording first ran out on (None: there is none)."""
    if out.recorded_ooms:
        return out.recorded_ooms[0][1]
    if out.stopped_at is not None and requests.first_oom_event is not None:
        return False  # it ran out before reaching that request
    return None


def smallest_cap(requests: Requests, settings: AllocatorSettings, uncapped: Outcome) -> tuple[int | None, int | None]:
    """(the smallest per-process cap under which every request is served, the recorded OOM's
    too, found by bisection as a re-run would and checked at caps just above it; a lower cap
    that also completes where a cap between them runs out, else None). (None, None) when
    even no cap is not enough."""
    if uncapped.oom_event is not None:
        return None, None

    # A trace that starts mid-run starts from the layout the recorded allocator had made: no
    # cap below it would have let the allocator make it, so no such cap is an answer. (Under
    # expandable segments, torch itself may map past the cap: the re-runs did, so the replay's
    # reserved peak is not held to it.)
    layout = requests.initial_reserved

    def fits(cap: int) -> bool:
        return cap >= layout and replay(requests, settings, limit=cap, per_process=True).oom_event is None

    hi = uncapped.reserved_peak
    tries = 0
    while not fits(hi):
        hi = int(hi * 1.25) + CAP_STEP
        tries += 1
        if tries > 8:
            return None, None
    top = hi  # completes: no cap above it needs checking
    lo = max(uncapped.allocated_at_peak, 0)
    if lo >= hi or fits(lo):
        return (lo if lo < hi else hi), None
    def resolution(cap: int) -> int:  # how finely a cap is told apart
        return max(CAP_STEP, int(cap * CAP_PRECISION))

    lowest = None
    while True:
        while hi - lo > resolution(hi):
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid
        above = [cap for cap in (hi + resolution(hi) * k for k in range(1, ABOVE_PROBES + 1)) if cap < top]
        failing = [cap for cap in above if not fits(cap)]
        if not failing:
            return hi, lowest
        # A cap above the answer runs out: the answer moves above the highest such cap found.
        lowest = hi if lowest is None else lowest
        lo, hi = max(failing), top


def check_fidelity(dev: DeviceModel, requests: Requests, recorded: AllocatorSettings) -> Fidelity:
    rows, codes, sizes = recorded_segment_events(dev)
    if not len(rows):
        return Fidelity(False, False, 0, 0, None, "the trace holds no segment events to check against")
    out = replay(requests, recorded, use_hints=True, hints_per_process=requests.process_cap)
    simulated = [(code, size) for code, _, size, _ in out.events]
    recorded_list = list(zip(codes.tolist(), sizes.tolist()))
    matched = 0
    for a, b in zip(simulated, recorded_list):
        if a != b:
            break
        matched += 1
    exact = simulated == recorded_list
    first = None
    if not exact:
        first = {"event": int(rows[matched]) if matched < len(rows) else None,
                 "recorded": _event_text(recorded_list[matched]) if matched < len(recorded_list) else None,
                 "simulated_event": out.events[matched][3] if matched < len(simulated) else None,
                 "simulated": _event_text(simulated[matched]) if matched < len(simulated) else None}
    return Fidelity(True, exact, len(recorded_list), matched, first)


def _event_text(item: tuple[int, int]) -> str:
    code, size = item
    return f"{SEGMENT_NAMES.get(code, code)} {format_size(size)}"


def recorded_reserved_peak(dev: DeviceModel, requests: Requests, reserved: np.ndarray | None = None) -> int:
    """The most the recording reserved; ``reserved``: its curve (recorded_reserved), if made."""
    curve = recorded_reserved(dev, requests) if reserved is None else reserved
    start = requests.initial_reserved
    return int(max(curve.max(), start) if len(curve) else max(start, dev.reserved))


def derive_limit(dev: DeviceModel, requests: Requests, cap: int | None,
                 recorded: AllocatorSettings | None = None, reserved: np.ndarray | None = None) -> Limit:
    """The limit: ``cap`` when given; else what the first recorded OOM implies (a per-process
    cap: at least the most this process ever reserved, and below what it asked for at the
    OOM and at each request served only after torch released its cache, which a try refused
    first; the device: what this process held plus what was free); else none. ``recorded``:
    the recording's settings (with a garbage collection threshold, torch releases its cache
    before a try, not after a refusal, so those releases tell nothing of the cap).
    ``reserved``: the recorded reserved curve (recorded_reserved), if made."""
    if cap is not None:
        return Limit(cap, True, "given")
    ooms = dev.oom_indices()
    if not len(ooms):
        return Limit(None, False, "none", "no OOM was recorded and no --cap given: no limit")
    k = int(ooms[0])
    trace = dev.trace
    if reserved is None:
        reserved = recorded_reserved(dev, requests)
    at_oom = int(reserved[k])
    device_free = max(int(trace.device_free[k]), 0)
    request = int(trace.size[k])
    if device_free > request:
        seen = int(reserved[: k + 1].max())
        below = at_oom + allocation_size(round_size(request, AllocatorSettings()))
        if recorded is not None and not recorded.garbage_collection_threshold:
            for start, target in requests.retried:
                if target < k:  # refused with what was reserved before the release, plus the new segment(s)
                    before = int(reserved[start - 1]) if start > 0 else requests.initial_reserved
                    below = min(below, before + int(reserved[target] - reserved[start:target].min()))
        if seen < below:
            middle = (seen + below) // 2
            return Limit(middle, True, "process cap",
                         f"a per-process cap between {format_size(seen)} and {format_size(below)} refused the request"
                         f" at event {k:,}; the replay uses the middle, {format_size(middle)}, and checks the"
                         " recorded OOM at both ends", low=seen, high=below - 1)
        return Limit(below - 1, True, "process cap",
                     f"the recording reserved {format_size(seen)} before its OOM yet was refused below"
                     f" {format_size(below)}: memory outside the allocator grew; the replay uses the lower bound")
    return Limit(at_oom + device_free, False, "device",
                 f"the device refused at event {k:,}: {format_size(at_oom)} reserved plus {format_size(device_free)}"
                 " free; memory outside this allocator is taken as constant")


def _rank(s: Scenario) -> tuple[bool, bool, float, int, int, bool]:
    runs_out = s.oom_event is not None and s.passes_recorded_oom is not True
    smallest = s.min_cap_bytes if s.min_cap_bytes is not None else math.inf
    later = -s.oom_event if runs_out and s.oom_event is not None else 0  # of two that run out, the later first
    return (runs_out, s.stopped_at is not None, smallest, later, s.reserved_peak, not s.recorded)


def advice(w: WhatIf) -> str:
    """One line: the best setting and what it changes, against the recorded one."""
    if not w.scenarios:
        return ""
    best = w.scenarios[0]
    base = next((s for s in w.scenarios if s.recorded), None)
    if not w.fidelity.checked:
        unsure = " (the trace has no segment events to check the model against)"
    else:
        unsure = "" if w.fidelity.exact else " (not certain: the replay does not reproduce the recording exactly)"
    # Under the limit of a recorded OOM, a setting that still runs out at the same place and needs no
    # smaller limit changes nothing the user can act on: its peak only says where the limit stopped it.
    same_outcome = base is not None and _rank(best)[:4] == _rank(base)[:4]
    fits = f"; the recording fits in {format_size(base.min_cap_bytes)}" \
        if base is not None and base.min_cap_bytes is not None else ""
    no_better = (f"no setting tried does better than the recorded one ({w.recorded_settings or 'default'}) under the"
                 f" same limit{fits}{unsure}")
    if base is None or best is base or (_rank(best)[:5] == _rank(base)[:5]) or \
            (w.recorded_oom is not None and same_outcome):
        return no_better
    peak = fits = outcome = ""
    if format_size(best.reserved_peak) != format_size(base.reserved_peak):  # no "5.81 GiB instead of 5.81 GiB"
        peak = f"reserved peak {format_size(best.reserved_peak)} instead of {format_size(base.reserved_peak)}"
    same_end = False  # the recorded OOM happening again is context, not a difference
    if w.recorded_oom is not None:
        if best.passes_recorded_oom:
            later = f"; it runs out later, at event {best.oom_event:,}" if best.oom_event is not None and \
                best.oom_event != w.recorded_oom else ""
            outcome = (f"the OOM at event {w.recorded_oom:,} does not happen{later}"
                       " (what the program did after it is not recorded)")
        elif best.oom_event is not None and best.oom_event < w.recorded_oom:
            outcome = (f"it runs out earlier, at event {best.oom_event:,}, before the recorded OOM at event"
                       f" {w.recorded_oom:,}")
        else:
            same_end = True
    elif base.oom_event is not None:  # none recorded, yet under this limit (a --cap) the recorded setting runs out
        if best.oom_event is None:
            outcome = ("it does not run out under this limit, where the recorded setting does at event"
                       f" {base.oom_event:,}")
        elif best.oom_event > base.oom_event:
            outcome = f"it runs out later under this limit, at event {best.oom_event:,} instead of {base.oom_event:,}"
    if best.min_cap_bytes is not None and base.min_cap_bytes is not None and \
            format_size(best.min_cap_bytes) != format_size(base.min_cap_bytes):
        fits = f"fits in {format_size(best.min_cap_bytes)} instead of {format_size(base.min_cap_bytes)}"
    if not (peak or outcome or fits):
        return no_better  # every difference too small to show
    if same_end:
        outcome = f"the OOM at event {w.recorded_oom:,} still happens"
    parts = [part for part in (peak, outcome, fits) if part]
    return f"{best.settings}: " + "; ".join(parts) + unsure


@dataclass
class OomReplay:
    """Each recorded OOM's request replayed under a few settings (``memtui oom``'s advice)."""

    exact: bool | None  # fidelity under the recorded settings (None: not checkable)
    served: dict[int, list[tuple[str, bool | None]]]  # oom event -> (settings, served; None: it depends on the cap)
    limit: Limit | None = None


def replay_ooms(snapshot: Snapshot, dev: DeviceModel) -> OomReplay:
    """Replay up to the last recorded OOM under the settings most often suggested."""
    if dev.partial_trace:
        return OomReplay(None, {})
    recorded_conf, recorded = settings_of_snapshot(snapshot.allocator_settings)
    requests = build_requests(dev)
    limit = derive_limit(dev, requests, None, recorded)
    fidelity = check_fidelity(dev, requests, recorded)
    tried = []
    if not recorded.expandable_segments:
        tried.append("expandable_segments:True")
    tried.append("max_split_size_mb:64")
    if limit.per_process:
        tried.append("garbage_collection_threshold:0.8")
    ooms = dev.oom_indices()
    last = int(ooms[-1]) if len(ooms) else -1
    served: dict[int, list[tuple[str, bool | None]]] = {int(i): [] for i in ooms}
    for text in tried:
        answers: dict[int, set[bool]] = {event: set() for event in served}
        for cap in [limit.bytes] + limit.ends():
            out = replay(requests, parse_conf(text), limit=cap, per_process=limit.per_process, until_event=last)
            reached = dict(out.recorded_ooms)
            for event in served:
                if event in reached:
                    answers[event].add(reached[event])
                elif out.stopped_at is not None and out.stopped_at <= event:
                    answers[event].add(False)
        for event, found in answers.items():
            if found:
                served[event].append((text, found.pop() if len(found) == 1 else None))
    return OomReplay(fidelity.exact if fidelity.checked else None, served, limit)
