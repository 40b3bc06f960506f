"""Why did it run out of memory: one diagnosis per ``oom`` entry.

The allocator's state is replayed to the moment just before the ``oom`` entry. By then
the caching allocator has already done what it does after a failed ``cudaMalloc``: it
released every cached segment with nothing live in it and retried (those are the
``segment_free`` entries that often precede the ``oom``), so the free memory still
cached sits in segments that live blocks **pin**: the allocator could not give it back.

A request can only be served from its own pool: above 1 MiB the large pool, else the
small pool (2 MiB segments), on the same stream, outside private pools (CUDA graphs).
The limit that refused it is the device when ``device_free`` is below the request, else
a per-process cap (``torch.cuda.set_per_process_memory_fraction``): the cap is at least
the most the trace ever reserved and below reserved + the segment the request needed,
so the **headroom** it left is known to lie in that range. The verdict:

* **external**: the device was full, and memory outside this allocator (other processes,
  NCCL, cuBLAS workspaces, the CUDA context beyond its usual size) is what the request
  was short of;
* **fragmentation**: the free memory of the request's pool plus what could still be
  obtained (the device's free memory, or the least headroom under the cap) covers the
  request, but no free block does;
* **capacity**: not enough memory even if all of it were one block, and the same request
  from the same stack had succeeded before: what else is live grew;
* **process_cap**: a per-process cap refused a request that the device had room for and
  that its stack never made this large before (a batch that grew past what the cap
  leaves); the headroom, the free memory pinned in segments and what expandable segments
  would change are counted.

Under a cap the snapshot does not record, the headroom is known only within its range;
when the request would have fit (the pool's holes packed together) in more than a tenth
of that range, the cap decides between fragmentation and capacity and the verdict is
**cannot tell**, with the share in its evidence.

Each diagnosis carries its evidence, a confidence and the alternatives weighed; it
mentions the garbage collector only when :func:`memtui.analysis.cycles.find_cycles`
suspects cycles on the same device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtui.allocator.settings import AllocatorSettings
from memtui.allocator.simulator import allocation_size, round_size
from memtui.analysis import evidence as ev
from memtui.analysis.attribution import AttributedSites, attribute, block_starts
from memtui.analysis.callsites import CallSites
from memtui.analysis.cycles import CycleReport, find_cycles
from memtui.analysis.live import reserved_curve
from memtui.analysis.whatif import Limit, replay_ooms
from memtui.errors import UsageError
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.address_n import format_address_n
from memtui.model.lifetimes import NONE
from memtui.replay import AllocatorState, Replayer
from memtui.state_figures import pool_free, request_pool, segment_pools
from memtui.units import format_bytes, plural

GIB = 1 << 30
# Memory outside the allocator that every CUDA process has (context, cuBLAS/cuDNN
# handles): only usage beyond this is worth calling external.
CONTEXT_ALLOWANCE = 1 * GIB

# Total memory as cudaMemGetInfo reports it for common GPUs, in GiB. Used only to
# estimate the device total when the user does not give it: the smallest entry that
# can hold what the snapshot shows to be in use and free.
COMMON_DEVICE_TOTALS_GIB = (7.79, 10.75, 11.75, 14.75, 15.77, 22.06, 23.69, 31.74, 39.39, 44.53, 47.54,
                            79.11, 79.15, 93.09, 94.5, 139.8, 178.35, 191.98)

VERDICTS = ("fragmentation", "capacity", "process_cap", "external")
CANNOT_TELL = "cannot tell"
EXPANDABLE_PAGE = 2 * 1024 * 1024  # expandable segments map physical memory in pages of this size (large pool)
GROWTH = 2  # a request this many times its stack's median earlier request grew (a growing batch)
WORTH_COUNTING = 0.1  # free memory below this share of the request is not worth a line of evidence
# Under a cap the snapshot does not record, a capacity verdict (process_cap or capacity)
# stands only when the request would have fit, holes packed together, in at most this share
# of the range the cap is known to lie in; above it the cap's size decides: cannot tell.
CAP_DOUBT = 0.1


@dataclass
class OomDiagnosis:
    device: int
    index: int
    time_us: float
    requested: int
    device_free: int
    stream: int
    pool: str  # "large" or "small"
    reserved: int
    allocated: int
    active: int
    cached_free: int  # reserved but not active, in every segment
    usable_free: int  # free bytes in segments this request could use
    largest_free_block: int  # largest free run in those segments
    verdict: str
    process_limit: bool
    cap_at_least: int | None
    cap_below: int | None
    device_total: int | None
    device_total_estimated: bool
    non_pytorch: int | None
    fits_with_expandable: int  # the largest request expandable segments could have served (least headroom)
    expandable_already: bool
    released_before: int  # bytes of cached segments released in the run-up to the OOM
    site: dict[str, Any] | None
    held_by_cycles: int = 0  # bytes live at the OOM from sites whose memory the collector freed
    top_sites: list[dict[str, Any]] = field(default_factory=list)
    largest_allocations: list[dict[str, Any]] = field(default_factory=list)
    confidence: str = "high"
    headroom_at_least: int | None = None  # under a cap: what it left above reserved
    headroom_below: int | None = None
    pinned: dict[str, Any] | None = None  # free memory in segments that live blocks kept
    private_pool_reserved: int = 0  # reserved in private pools (CUDA graphs): no use to this request
    request_history: dict[str, Any] = field(default_factory=dict)
    freed_after: dict[str, Any] | None = None  # the burst of frees right after the OOM, and its cause
    evidence: list[ev.Evidence] = field(default_factory=list)
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    # The request replayed through the allocator model (analysis/whatif.py) under other
    # settings: (settings, served); replay_exact: whether the model reproduced the recording.
    replayed: list[tuple[str, bool | None]] = field(default_factory=list)
    replay_exact: bool | None = None

    @property
    def served_by(self) -> list[str]:
        """The settings under which the replayed allocator serves this request."""
        return [text for text, served in self.replayed if served is True]

    @property
    def limit(self) -> str:
        return "process cap" if self.process_limit else "device"

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "index": self.index,
            "time_us": self.time_us if np.isfinite(self.time_us) else None,
            "requested": self.requested,
            "device_free": self.device_free,
            "stream": self.stream,
            "pool": self.pool,
            "reserved": self.reserved,
            "allocated": self.allocated,
            "active": self.active,
            "cached_free": self.cached_free,
            "usable_free": self.usable_free,
            "largest_free_block": self.largest_free_block,
            "verdict": self.verdict,
            "confidence": self.confidence,
            "replayed": [{"settings": t, "serves_request": v} for t, v in self.replayed],
            "replay_exact": self.replay_exact,
            "limit": self.limit,
            "evidence": [e.to_json() for e in self.evidence],
            "alternatives": self.alternatives,
            "process_limit": self.process_limit,
            "process_cap_at_least": self.cap_at_least,
            "process_cap_below": self.cap_below,
            "headroom_at_least": self.headroom_at_least,
            "headroom_below": self.headroom_below,
            "pinned": self.pinned,
            "private_pool_reserved": self.private_pool_reserved,
            "request_history": self.request_history,
            # The snapshot does not record the device's size: an estimate is only a lower bound.
            "device_total": None if self.device_total_estimated else self.device_total,
            "device_total_at_least": self.device_total,
            "device_total_estimated": self.device_total_estimated,
            "non_pytorch": self.non_pytorch,
            "fits_with_expandable_segments": self.fits_with_expandable,
            "expandable_segments": self.expandable_already,
            "released_before": self.released_before,
            "site": self.site,
            "held_by_cycles": self.held_by_cycles,
            "freed_after": self.freed_after,
            "top_sites": self.top_sites,
            "largest_allocations": self.largest_allocations,
        }


def diagnose_ooms(snapshot: Snapshot, device: int | None = None, device_total: int | None = None,
                  depth: int = 1, top: int = 10) -> list[OomDiagnosis]:
    """A diagnosis for every ``oom`` entry (of one device, or of all)."""
    sites = CallSites(snapshot.stacks, depth)
    out = []
    for dev in snapshot.devices:
        if device is not None and dev.device != device:
            continue
        indices = dev.oom_indices()
        if len(indices) == 0 or dev.partial_trace:  # a filtered export's state at an OOM is not in it
            continue
        replayer = Replayer(dev)
        cycles = find_cycles(snapshot, dev, depth)
        waiting = {w["index"]: w["bytes"] for w in cycles.ooms_while_accumulating} if cycles.suspected else {}
        reserved = reserved_curve(dev)
        replayed = replay_ooms(snapshot, dev)
        for i in indices:
            diagnosis = diagnose(snapshot, dev, replayer, int(i), sites, device_total, top, reserved,
                                 replayed.limit)
            diagnosis.held_by_cycles = waiting.get(int(i), 0)
            diagnosis.replayed, diagnosis.replay_exact = replayed.served.get(int(i), []), replayed.exact
            _replay_evidence(diagnosis)
            _after(diagnosis, dev, cycles)
            out.append(diagnosis)
    return out


def diagnose(snapshot: Snapshot, dev: DeviceModel, replayer: Replayer, index: int, sites: CallSites,
             device_total: int | None = None, top: int = 10, reserved_by_event: np.ndarray | None = None,
             implied: Limit | None = None) -> OomDiagnosis:
    trace = dev.trace
    requested = int(trace.size[index])
    device_free = max(int(trace.device_free[index]), 0)
    stream = int(trace.stream[index])
    state = replayer.state_at(index - 1)
    pool = request_pool(requested)
    # The same figures the explorer's map and inspector show (memtui.state_figures).
    pools = segment_pools(state, dev, snapshot.strings)
    usable = pool_free(state, pools, pool, stream)
    usable_free, largest_free = usable.free, usable.largest
    reserved, active = state.reserved, state.active

    process_limit = device_free > requested
    if reserved_by_event is None:
        reserved_by_event = reserved_curve(dev)
    seen = int(reserved_by_event[:index].max()) if index > 0 and len(reserved_by_event) else reserved
    cap_at_least = cap_below = None
    if process_limit:
        cap_at_least, cap_below = _cap_bracket(
            max(seen, reserved), reserved + allocation_size(round_size(requested, AllocatorSettings())), implied)
    # What could still be obtained: the device's free memory, or the least the cap left.
    headroom = device_free if not process_limit else cap_at_least - reserved
    # The device total only matters when the device itself was full.
    total, estimated = (None, False) if process_limit else _device_total(device_total, reserved, device_free)
    non_pytorch = max(total - reserved - device_free, 0) if total is not None else None

    sid = int(trace.stack[index])
    # Each live block's call site, memory made on the autograd thread under its backward()
    # line (memtui/analysis/attribution.py); the request's own the same way.
    held = attribute(snapshot, dev, sites, _state_block_stacks(dev, state), block_starts(dev, state.blk_life))
    request = attribute(snapshot, dev, sites, np.array([sid]), np.array([index]))
    request_site = int(request.of_item[0])
    d = OomDiagnosis(
        device=dev.device, index=index, time_us=float(trace.time_us[index]), requested=requested,
        device_free=int(trace.device_free[index]), stream=stream, pool=pool, reserved=reserved,
        allocated=state.allocated, active=active, cached_free=reserved - active, usable_free=usable_free,
        largest_free_block=largest_free, verdict="capacity", process_limit=process_limit,
        cap_at_least=cap_at_least, cap_below=cap_below, device_total=total, device_total_estimated=estimated,
        non_pytorch=non_pytorch, fits_with_expandable=reserved - active + headroom,
        expandable_already=bool(snapshot.allocator_settings.get("expandable_segments")),
        released_before=_released_before(dev, index),
        site=request.describe(request_site) if sid >= 0 or request_site >= len(sites) else None,
        top_sites=held.top(state.blk_size, top),
        largest_allocations=_largest(dev, state, held, top),
        headroom_at_least=headroom if process_limit else None,
        headroom_below=cap_below - reserved if process_limit else None,
        pinned=_pinned(dev, state, held),
        private_pool_reserved=int(state.seg_size[pools.private].sum()) if len(state.seg_size) else 0,
        request_history=_request_history(dev, index))
    _verdict(d, headroom)
    return d


def _verdict(d: OomDiagnosis, headroom: int) -> None:
    """The verdict, with its confidence, evidence and the alternatives weighed."""
    f, e = format_bytes, d.evidence
    r, usable, largest = d.requested, d.usable_free, d.largest_free_block
    history = d.request_history
    if d.process_limit:
        e.append(ev.Evidence(f"the device had {f(d.device_free)} free, more than the {f(r)} asked: a per-process cap"
                             f" refused it; the cap is at least {f(d.cap_at_least)} (the most reserved so far) and"
                             f" below {f(d.cap_below)}, so it left between {f(d.headroom_at_least)} and"
                             f" {f(d.headroom_below)} above the {f(d.reserved)} reserved", "process_cap", d.index))
    else:
        e.append(ev.Evidence(f"the device had {f(d.device_free)} free, less than the {f(r)} asked: the device"
                             " itself was full", "capacity", d.index))
    e.append(ev.Evidence(f"{f(usable)} free in the {d.pool} pool's segments on stream {d.stream}, the largest block"
                         f" {f(largest)}", "fragmentation" if usable + headroom >= r else "capacity", d.index))
    holes = usable * 2 >= r and largest * 2 < usable
    external = (d.non_pytorch is not None and d.non_pytorch - CONTEXT_ALLOWANCE >= r - usable - headroom > 0)
    # With expandable segments the allocator maps and unmaps whole pages: free memory that
    # covers the request by less than a page (or 1%) was not enough once rounded.
    slack = usable + headroom - r
    near_cap = d.expandable_already and 0 <= slack < max(r // 100, EXPANDABLE_PAGE)
    if near_cap and largest < r:
        d.verdict, d.confidence = "capacity", "medium"
        e.append(ev.Evidence(f"expandable segments were on, and free memory plus what could still be had"
                             f" ({f(usable + headroom)}) covers the {f(r)} request by only {f(slack)}, less than a"
                             f" {f(EXPANDABLE_PAGE)} page or 1%: rounded to the pages it maps, the request did not fit;"
                             " what is live must shrink", "capacity", d.index))
    elif usable + headroom >= r and largest < r:
        d.verdict, d.confidence = "fragmentation", "high"
        e.append(ev.Evidence(f"free memory ({f(usable)}) plus what could still be had ({f(headroom)}) covers the"
                             " request, but no free block does", "fragmentation", d.index))
    elif external:
        d.verdict, d.confidence = "external", "high" if not d.device_total_estimated else "medium"
        size = (f"at least {f(d.non_pytorch)} of the device (its size is not recorded; it has at least"
                f" {f(d.device_total)}, the smallest common GPU above what is seen)" if d.device_total_estimated
                else f"{f(d.non_pytorch)} of the {f(d.device_total)} device")
        e.append(ev.Evidence(f"{size} is used outside this allocator while it reserved only {f(d.reserved)}: another"
                             " process, NCCL, cuBLAS workspaces or a large CUDA context; without it the request"
                             " would have fit", "external", d.index))
    elif d.process_limit and largest < r and (share := cap_share_that_fits(d)) > CAP_DOUBT:
        # Whether the holes packed together would have served it depends on the cap, which
        # the snapshot does not record: what it would still need lies within the cap's range.
        d.verdict, d.confidence = CANNOT_TELL, "low"
        e.append(ev.Evidence(f"{f(usable)} sits free in holes of the pool (the largest {f(largest)}): packed together"
                             f" the request would need {f(r - usable)} more under the cap, which left between"
                             f" {f(d.headroom_at_least)} and {f(d.headroom_below)}; in {share:.0%} of that range it"
                             " would have fit: the cap's size, not recorded, decides between fragmentation and"
                             " capacity", CANNOT_TELL, d.index))
    elif d.process_limit and (history.get("growing") or not history.get("count")):
        d.verdict, d.confidence = "process_cap", "medium"
        e.append(ev.Evidence(
            f"this stack's requests grew: {plural(history['count'], 'earlier request')}, the first"
            f" {f(history['first'])}, the median {f(history['median'])}, now {f(r)}: the work outgrew what the cap"
            " leaves; nothing piled up"
            if history.get("count") else "this stack made no request before: a new, larger piece of work, refused by"
            " the cap", "process_cap", d.index))
    else:
        d.verdict = "capacity"
        d.confidence = "high" if not d.process_limit else "medium"
        if history.get("count"):
            e.append(ev.Evidence(f"{plural(history['count'], 'earlier request')} from the same stack (median"
                                 f" {f(history['median'])}) succeeded: the request did not grow, what else is live"
                                 " did", "capacity", d.index))
        e.append(ev.Evidence(f"{f(d.allocated)} was live: even as one block, free memory and headroom"
                             f" ({f(usable + headroom)}) fall {f(max(r - usable - headroom, 0))} short", "capacity",
                             d.index))
    _pinned_evidence(d, headroom)
    if d.private_pool_reserved:
        e.append(ev.Evidence(f"{f(d.private_pool_reserved)} is reserved in private pools (CUDA graphs), which this"
                             " request cannot use", "capacity", d.index))
    if d.released_before:
        e.append(ev.Evidence(f"just before, the allocator released {f(d.released_before)} of cached segments to"
                             " retry", d.verdict, d.index))
    _alternatives(d, headroom, external, holes or d.verdict == CANNOT_TELL)


def cap_share_that_fits(d: OomDiagnosis) -> float:
    """Under a per-process cap, the share of the range the cap is known to lie in (the
    headroom it left, between ``headroom_at_least`` and ``headroom_below``) in which the
    request would have fit had the pool's free memory been one block: 0 when no cap in the
    range lets it fit (the memory was short), 1 when every one does (fragmentation)."""
    low, high = d.headroom_at_least or 0, d.headroom_below or 0
    needed = d.requested - d.usable_free  # headroom the request needed besides the holes
    if high <= low:
        return 1.0 if low >= needed else 0.0
    return min(max((high - max(low, needed)) / (high - low), 0.0), 1.0)


def _pinned_evidence(d: OomDiagnosis, headroom: int) -> None:
    """Free memory the allocator could not release, and what expandable segments would change."""
    f, e, p = format_bytes, d.evidence, d.pinned
    # Free memory worth counting against this request: a tenth of it or more.
    worth = d.requested * WORTH_COUNTING
    # A request of 0 bytes or fewer (a hostile trace) finds even no pinned memory worth counting.
    if p and p["segments"] and p["free"] >= worth:
        e.append(ev.Evidence(f"{f(p['free'])} was free inside {plural(p['segments'], 'segment')} that live blocks"
                             f" pinned, so the allocator could not release it; the largest, {f(p['largest_free'])},"
                             f" in a {f(p['segment_size'])} segment kept by {plural(p['live_blocks'], 'live block')}"
                             f" ({f(p['live_bytes'])}" + _blocker_text(p) + ")", d.verdict, d.index))
    if d.expandable_already:
        e.append(ev.Evidence("expandable segments were already on", d.verdict, d.index))


def _replay_evidence(d: OomDiagnosis) -> None:
    """What the allocator model says of this request under other settings (memtui whatif)."""
    if not d.replayed:
        return
    unsure = "" if d.replay_exact else (" (the model does not reproduce this recording exactly: not certain)"
                                        if d.replay_exact is False else " (the trace has no segment events to"
                                        " check the model against)")
    for text, served in d.replayed:
        outcome = {True: "serves this request", False: "still cannot serve this request",
                   None: "serves this request under some of the caps the recording allows, not all"}[served]
        d.evidence.append(ev.Evidence(f"replayed through the allocator model with {text}, under the same limit, it"
                                      f" {outcome}{unsure}", d.verdict, d.index))


def _blocker_text(p: dict[str, Any]) -> str:
    b = p.get("blocker")
    return f", the largest {format_bytes(b['size'])} {b['address_n']} from {b['site']}" if b else ""


def _alternatives(d: OomDiagnosis, headroom: int, external: bool, holes: bool) -> None:
    f, alt, v = format_bytes, d.alternatives, d.verdict
    r = d.requested
    if v != "fragmentation":
        alt.append({"verdict": "fragmentation", "why": f"rejected: free memory in the pool ({f(d.usable_free)}) and"
                    f" what could still be had ({f(headroom)}) do not cover {f(r)}" if not holes else
                    "not excluded: holes hold much of the request; the cap's exact size decides"})
    if v == CANNOT_TELL:
        alt.append({"verdict": "capacity", "why": "not excluded: if the cap left less than the holes lack, the memory"
                    " itself was short"})
    if v != "external":
        alt.append({"verdict": "external", "why": "rejected: the device had room; a cap refused it" if d.process_limit
                    else "rejected: memory outside this allocator does not explain the shortfall"
                    + (" (device total estimated: give --device-memory)" if d.device_total_estimated else "")})
    if v == "capacity" and d.process_limit:
        alt.append({"verdict": "process_cap", "why": "rejected as the main cause: the request did not grow, what"
                    " else is live did (raising the cap would also help)"})
    if v == "process_cap":
        alt.append({"verdict": "capacity", "why": "not the main cause: nothing piled up; the request itself grew"
                    " (reducing what is live would also help)"})


def _pinned(dev: DeviceModel, state: AllocatorState, held: AttributedSites) -> dict[str, Any] | None:
    """Free memory in segments with live blocks: after the OOM-time release, every cached
    free byte is of this kind. The segment holding the most of it, and what pins it."""
    if not len(state.seg_size):
        return None
    free, largest, _ = state.free_runs_per_segment()
    live = np.bincount(state.blk_segment[state.blk_segment != NONE].astype(np.int64),
                       minlength=len(state.seg_size))
    pinned = (live > 0) & (free > 0)
    if not pinned.any():
        return {"free": 0, "segments": 0}
    s = int(np.flatnonzero(pinned)[np.argmax(free[pinned])])
    blocks = state.segment_blocks(s)
    biggest = int(blocks[np.argmax(state.blk_size[blocks])]) if len(blocks) else -1
    blocker = None
    if biggest >= 0:
        life = int(state.blk_life[biggest])
        name = format_address_n(dev.lives.addr[life], dev.lives.version[life]) if life != NONE else (
            dev.block_address_n(int(state.blk_final[biggest])) if state.blk_final[biggest] != NONE else "")
        blocker = {"address_n": name, "size": int(state.blk_size[biggest]),
                   "site": held.label(int(held.of_item[biggest]))}
    return {"free": int(free[pinned].sum()), "segments": int(pinned.sum()), "segment_size": int(state.seg_size[s]),
            "largest_free": int(largest[s]), "live_blocks": len(blocks),
            "live_bytes": int(state.blk_size[blocks].sum()), "blocker": blocker}


def _request_history(dev: DeviceModel, index: int) -> dict[str, Any]:
    """Earlier allocations from the failing request's own stack, and whether they grew:
    ``growing`` when the request is at least ``GROWTH`` times their median (a batch that
    grew), rather than one more of the same (a pile)."""
    trace = dev.trace
    sid = int(trace.stack[index])
    if sid < 0:
        return {}
    mine = np.flatnonzero((trace.action[:index] == act.ALLOC) & (trace.stack[:index] == sid))
    sizes = trace.size[mine].astype(np.int64)
    if not len(sizes):
        return {"count": 0, "first": 0, "median": 0, "largest_before": 0, "growing": False}
    median = int(np.median(sizes))
    return {"count": len(sizes), "first": int(sizes[0]), "median": median, "largest_before": int(sizes.max()),
            "growing": bool(int(trace.size[index]) >= GROWTH * median)}


def _after(d: OomDiagnosis, dev: DeviceModel, cycles: CycleReport) -> None:
    """The burst of frees right after the OOM (no allocation between), and its cause."""
    action = dev.trace.action
    allocs = np.flatnonzero(action[d.index + 1:] == act.ALLOC)
    until = d.index + 1 + int(allocs[0]) if len(allocs) else len(action)
    for b in cycles.bursts + cycles.other_bursts:
        if d.index < b.index < until:
            d.freed_after = {"index": b.index, "bytes": b.bytes, "cause": b.cause, "confidence": b.confidence}
            if b.cause != "cycle" or cycles.suspected:
                d.evidence.append(ev.Evidence(
                    f"right after, {format_bytes(b.bytes)} was freed at once by "
                    f"{_CAUSE_AFTER.get(b.cause, b.cause)} ({b.confidence} confidence, see memtui cycles)",
                    d.verdict, b.index))
            break
    if d.held_by_cycles:
        d.evidence.append(ev.Evidence(f"{format_bytes(d.held_by_cycles)} of what was live came from sites whose"
                                      " memory the garbage collector freed in bursts: reference cycles"
                                      f" ({cycles.confidence} confidence, see memtui cycles)", d.verdict, d.index))


_CAUSE_AFTER = {"cycle": "the garbage collector", "exception": "the exception's traceback being let go (the"
                " failing call's frames held it)", "refcount": "reference counting", "autograd": "the autograd"
                " engine", "teardown": "teardown", "unknown": "something the stacks do not tell"}


def _cap_bracket(at_least: int, below: int, implied: Limit | None) -> tuple[int, int]:
    """The cap this OOM brackets (at least ``at_least``, below ``below``), narrowed to the one
    whatif brackets for the whole run where they overlap (derive_limit: the requests torch
    served only after releasing its cache narrow it too)."""
    if implied is not None and implied.per_process and implied.low is not None and implied.high is not None:
        low, high = max(at_least, implied.low), min(below, implied.high + 1)
        if low < high:
            return low, high
    return at_least, below


def _device_total(given: int | None, reserved: int, device_free: int) -> tuple[int | None, bool]:
    seen = reserved + device_free
    if given and given < seen:  # the OOM saw more than that: the figure given is not this device's
        raise UsageError(f"--device-memory {format_bytes(given)} is less than the OOM saw on the device:"
                         f" {format_bytes(reserved)} reserved and {format_bytes(device_free)} free")
    if given:
        return int(given), False
    for gib in COMMON_DEVICE_TOTALS_GIB:
        total = int(gib * GIB)
        if total >= seen:
            return total, True
    return None, False


def _released_before(dev: DeviceModel, index: int) -> int:
    """Bytes of cached segments released since the program last freed anything.

    Between the program's last free and the OOM only allocations happened, so segment
    frees there are the allocator emptying its cache to retry a failed cudaMalloc.
    """
    action = dev.trace.action[:index]
    frees = np.flatnonzero(np.isin(action, act.BLOCK_END + (act.FREE_REQUESTED,)))
    since = int(frees[-1]) + 1 if len(frees) else 0
    released = np.isin(action[since:], act.SEGMENT_END)
    return int(dev.trace.size[since:index][released].sum())


def _state_block_stacks(dev: DeviceModel, state: AllocatorState) -> np.ndarray:
    """Stack id of each live block of a replayed state."""
    life = state.blk_life
    from_trace = life != NONE
    stacks = np.full(len(life), -1, np.int64)
    if from_trace.any():
        start = dev.lives.start[life[from_trace]]
        ok = start != NONE
        got = np.full(len(start), -1, np.int64)
        got[ok] = dev.trace.stack[start[ok]]
        stacks[from_trace] = got
    final = state.blk_final
    fill = (stacks < 0) & (final != NONE)
    stacks[fill] = dev.blocks.stack[final[fill]]
    return stacks


def _largest(dev: DeviceModel, state: AllocatorState, held: AttributedSites, limit: int) -> list[dict[str, Any]]:
    order = np.argsort(-state.blk_size, kind="stable")[:limit]
    out = []
    for b in order:
        life = int(state.blk_life[b])
        if life != NONE:
            name = format_address_n(dev.lives.addr[life], dev.lives.version[life])
            event = int(dev.lives.start[life])
        else:
            name = dev.block_address_n(int(state.blk_final[b])) if state.blk_final[b] != NONE else ""
            event = NONE
        out.append({"address_n": name, "size": int(state.blk_size[b]), "alloc_index": event,
                    "site": held.label(int(held.of_item[b]))})
    return out
