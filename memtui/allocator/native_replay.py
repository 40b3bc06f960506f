"""The replay loop compiled (src/memtui_native/allocator.c), with the Python model as reference.

:func:`replay_native` packs a request stream and the settings into int64 arrays for
``memtui._native.allocator_replay`` and unpacks what it returns into the same
:class:`~memtui.allocator.replay.Outcome` the Python loop gives (tests compare the two on
every recording). It is used where memtui was built with its compiled part and the replay
needs no simulator state afterwards; ``MEMTUI_NO_NATIVE=1`` turns it off.
"""

from __future__ import annotations

import os

import numpy as np

from memtui.allocator.settings import K_LARGE_BUFFER, AllocatorSettings
from memtui.allocator.simulator import MAX_DEVICE_BYTES
from memtui.compiled import native as _native

INT64_MAX = (1 << 63) - 1
# Addresses the compiled loop is given stay below this: a segment placed there, or a block
# inside one, ends well before INT64_MAX.
ADDRESS_END = 1 << 62
# How far below the lowest address the compiled loop may place new segments (it places them
# downwards from there; INT64_MIN lies past 2^63).
FLOOR_ROOM = 1 << 62
available = _native is not None and hasattr(_native, "allocator_replay") and not os.environ.get("MEMTUI_NO_NATIVE")


def can_replay(requests, settings: AllocatorSettings | None = None, va_size: int = 0) -> bool:
    """Whether the compiled loop takes these requests: every address it is given or places a
    segment at, every size and every sum of sizes fits int64 (its arithmetic is int64; the
    Python loop's integers have no end). Sizes are bounded by MAX_DEVICE_BYTES (no request
    above it is served, no state holds more); addresses by what is checked here."""
    if not available:
        return False
    values = [a for a, _ in requests.recorded_segments] + [s.addr for s in requests.initial]
    if not all(0 <= v < ADDRESS_END for v in values):
        return False
    if requests.initial_reserved > MAX_DEVICE_BYTES or not 0 <= va_size <= MAX_DEVICE_BYTES:
        return False
    # New segments go below the lowest address, each at most its request rounded (at most
    # twice it) plus a 20 MiB segment and 2 MiB of alignment; with expandable segments each
    # of a malloc's three tries may reserve a range of va_size more. Every request counts
    # (a free's size too: a bound above what the allocations need).
    sizes = np.clip(np.asarray(requests.size, np.int64), 0, MAX_DEVICE_BYTES).astype(np.float64)
    below = 2 * float(sizes.sum()) + len(sizes) * float(24 << 20)
    if settings is not None and settings.expandable_segments:
        below += 3.0 * len(sizes) * (va_size + 2 * K_LARGE_BUFFER)
    return below < FLOOR_ROOM


def replay_native(requests, settings: AllocatorSettings, *, limit, per_process, use_hints, until_event, series,
                  va_size, hints_per_process, outcome_type, dump_state: bool = False):
    n = len(requests)
    columns = np.concatenate([np.asarray(c, np.int64) for c in (
        requests.kind, requests.slot, requests.size, requests.stream, requests.pool, requests.event,
        requests.hint)]) if n else np.zeros(0, np.int64)
    slots = np.asarray(requests.slot, np.int64)
    max_slot = int(slots.max(initial=0))
    for seg in requests.initial:
        for _, _, slot, _ in seg.blocks:
            max_slot = max(max_slot, slot)
    # -1 is no limit there: a negative limit (a device limit from a trace whose reserved curve
    # goes below 0) refuses every segment, as 0 does, and one past int64 refuses none.
    packed_limit = -1 if limit is None else min(max(limit, 0), INT64_MAX)
    params = np.array(
        [min(settings.max_split_size, INT64_MAX), settings.max_non_split_rounding_size,
         *settings.roundup_power2_divisions, int(settings.expandable_segments),
         packed_limit, int(per_process), int(use_hints), int(hints_per_process),
         -1 if until_event is None else until_event, int(series), va_size, len(requests.pools),
         requests.lowest_address, max_slot, int(dump_state)], np.int64)
    recorded = np.array([a for a, _ in requests.recorded_segments] + [s for _, s in requests.recorded_segments],
                        np.int64)
    initial: list[int] = []
    for seg in requests.initial:
        initial += [seg.addr, seg.size, seg.stream, seg.pool, int(seg.small), int(seg.expandable), len(seg.blocks)]
        for addr, size, slot, pending in seg.blocks:
            initial += [addr, size, slot, int(pending)]
    freeable: list[int] = []
    for row, pools in requests.freeable.items():
        freeable += [row, len(pools), *pools]
    events, ooms, figures, s_reserved, s_allocated, blocks = _native.allocator_replay(
        columns, params, float(settings.garbage_collection_threshold), recorded, np.array(initial, np.int64),
        np.array(freeable, np.int64))
    peak, peak_event, active, allocated, oom_event, oom_size, stopped, retries, done = figures
    table = np.frombuffer(events, np.int64).reshape(-1, 4)
    out = outcome_type(events=[tuple(row) for row in table.tolist()])
    out.reserved_peak, out.peak_event, out.active_at_peak, out.allocated_at_peak = peak, peak_event, active, allocated
    out.oom_event = None if oom_event < 0 else oom_event
    out.oom_size = oom_size
    out.stopped_at = None if stopped < 0 else stopped
    out.retries = retries
    out.recorded_ooms = [(e, bool(v)) for e, v in np.frombuffer(ooms, np.int64).reshape(-1, 2).tolist()]
    if dump_state:
        out.block_table = np.frombuffer(blocks, np.int64).reshape(-1, 10)
    if series:
        out.series_event = requests.event[:done]
        out.series_reserved = np.frombuffer(s_reserved, np.int64).copy()
        out.series_allocated = np.frombuffer(s_allocated, np.int64).copy()
    return out
