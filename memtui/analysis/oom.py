"""Why did it run out of memory: one diagnosis per ``oom`` entry.

The allocator's state is replayed to the moment just before the ``oom`` entry. By then
the caching allocator has already done what it does after a failed ``cudaMalloc``: it
released every cached segment with nothing live in it and retried (those are the
``segment_free`` entries that often precede the ``oom``), so the free memory still
cached sits in segments that are partly in use.

A request can only be served from its own pool: above 1 MiB the large pool, else the
small pool (2 MiB segments), on the same stream, outside private pools (CUDA graphs).
The verdict compares the request with what it could have used:

* **fragmentation**: the usable free cached memory plus what the device (or the
  process cap) could still give covers the request, but no single free block does;
* **external**: memory outside PyTorch's allocator (other processes, NCCL, the CUDA
  context beyond its usual size) is what the request was short of;
* **capacity**: not enough memory even if everything free were one block.

When the device had more free memory than the request, the device was not full: a
per-process cap (``torch.cuda.set_per_process_memory_fraction``) refused it. The cap
is then at least the reserved memory and below reserved + request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.analysis.callsites import CallSites, top_sites
from memtui.analysis.cycles import find_cycles
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.address_n import format_address_n
from memtui.model.lifetimes import NONE
from memtui.replay import AllocatorState, Replayer
from memtui.state_figures import SMALL_REQUEST, SMALL_SEGMENT, pool_free, request_pool, segment_pools

GIB = 1 << 30
# Memory outside the allocator that every CUDA process has (context, cuBLAS/cuDNN
# handles): only usage beyond this is worth calling external.
CONTEXT_ALLOWANCE = 1 * GIB

# Total memory as cudaMemGetInfo reports it for common GPUs, in GiB. Used only to
# estimate the device total when the user does not give it: the smallest entry that
# can hold what the snapshot shows to be in use and free.
COMMON_DEVICE_TOTALS_GIB = (7.79, 10.75, 11.75, 14.75, 15.77, 22.06, 23.69, 31.74, 39.39, 44.53, 47.54,
                            79.11, 79.15, 93.09, 94.5, 139.8, 178.35, 191.98)

VERDICTS = ("fragmentation", "capacity", "external")


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
    fits_with_expandable: int  # the largest request expandable segments could have served
    expandable_already: bool
    released_before: int  # bytes of cached segments released in the run-up to the OOM
    site: dict | None
    held_by_cycles: int = 0  # bytes the garbage collector freed later in a suspected cycle burst
    top_sites: list[dict] = field(default_factory=list)
    largest_allocations: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
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
            "process_limit": self.process_limit,
            "process_cap_at_least": self.cap_at_least,
            "process_cap_below": self.cap_below,
            "device_total": self.device_total,
            "device_total_estimated": self.device_total_estimated,
            "non_pytorch": self.non_pytorch,
            "fits_with_expandable_segments": self.fits_with_expandable,
            "expandable_segments": self.expandable_already,
            "released_before": self.released_before,
            "site": self.site,
            "held_by_cycles": self.held_by_cycles,
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
        if len(indices) == 0:
            continue
        replayer = Replayer(dev)
        waiting = {w["index"]: w["bytes"] for w in find_cycles(snapshot, dev, depth).ooms_while_accumulating}
        for i in indices:
            diagnosis = diagnose(snapshot, dev, replayer, int(i), sites, device_total, top)
            diagnosis.held_by_cycles = waiting.get(int(i), 0)
            out.append(diagnosis)
    return out


def diagnose(snapshot: Snapshot, dev: DeviceModel, replayer: Replayer, index: int, sites: CallSites,
             device_total: int | None = None, top: int = 10) -> OomDiagnosis:
    trace = dev.trace
    requested = int(trace.size[index])
    device_free = max(int(trace.device_free[index]), 0)
    stream = int(trace.stream[index])
    state = replayer.state_at(index - 1)
    pool = request_pool(requested)
    # The same figures the explorer's map and inspector show (memtui.state_figures).
    usable = pool_free(state, segment_pools(state, dev, snapshot.strings), pool, stream)
    usable_free, largest_free = usable.free, usable.largest
    reserved, active = state.reserved, state.active

    process_limit = device_free > requested
    # Under a cap the allocator could not grow past it; on a full device it could still
    # have had what cudaMalloc reported free.
    headroom = 0 if process_limit else device_free
    # The device total only matters when the device itself was full.
    total, estimated = (None, False) if process_limit else _device_total(device_total, reserved, device_free)
    non_pytorch = max(total - reserved - device_free, 0) if total is not None else None

    shortfall = requested - usable_free - headroom
    if shortfall <= 0:
        verdict = "fragmentation"
    elif non_pytorch is not None and non_pytorch - CONTEXT_ALLOWANCE >= shortfall:
        verdict = "external"
    else:
        verdict = "capacity"

    sid = int(trace.stack[index])
    stacks = _state_block_stacks(dev, state)
    return OomDiagnosis(
        device=dev.device,
        index=index,
        time_us=float(trace.time_us[index]),
        requested=requested,
        device_free=int(trace.device_free[index]),
        stream=stream,
        pool=pool,
        reserved=reserved,
        allocated=state.allocated,
        active=active,
        cached_free=reserved - active,
        usable_free=usable_free,
        largest_free_block=largest_free,
        verdict=verdict,
        process_limit=process_limit,
        cap_at_least=reserved if process_limit else None,
        cap_below=reserved + _segment_size_for(requested) if process_limit else None,
        device_total=total,
        device_total_estimated=estimated,
        non_pytorch=non_pytorch,
        fits_with_expandable=usable_free + headroom,
        expandable_already=bool(snapshot.allocator_settings.get("expandable_segments")),
        released_before=_released_before(dev, index),
        site=sites.describe(sites.of_stack(sid)) if sid >= 0 else None,
        top_sites=top_sites(sites, sites.of_stacks(stacks), state.blk_size, top),
        largest_allocations=_largest(dev, state, stacks, sites, top),
    )


def _segment_size_for(requested: int) -> int:
    """Size of the segment the allocator asks cudaMalloc for to serve ``requested``."""
    if requested <= SMALL_REQUEST:
        return SMALL_SEGMENT
    if requested < 10 * SMALL_REQUEST:
        return 20 * SMALL_REQUEST
    return -(-requested // SMALL_SEGMENT) * SMALL_SEGMENT


def _device_total(given: int | None, reserved: int, device_free: int) -> tuple[int | None, bool]:
    if given:
        return int(given), False
    seen = reserved + device_free
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


def _largest(dev: DeviceModel, state: AllocatorState, stacks: np.ndarray, sites: CallSites,
             limit: int) -> list[dict]:
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
                    "site": sites.label(sites.of_stack(int(stacks[b])))})
    return out
