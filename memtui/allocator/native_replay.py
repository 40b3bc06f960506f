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

from memtui.allocator.settings import AllocatorSettings

try:
    from memtui import _native
except ImportError:  # built without a C compiler
    _native = None

INT64_MAX = (1 << 63) - 1
available = _native is not None and hasattr(_native, "allocator_replay") and not os.environ.get("MEMTUI_NO_NATIVE")


def can_replay(requests) -> bool:
    """Whether the compiled loop takes these requests (every address and size fits int64)."""
    if not available:
        return False
    values = [a for a, _ in requests.recorded_segments] + [s.addr for s in requests.initial]
    return all(0 <= v < INT64_MAX for v in values) and int(requests.size.max(initial=0)) < INT64_MAX


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
    params = np.array(
        [min(settings.max_split_size, INT64_MAX), settings.max_non_split_rounding_size,
         *settings.roundup_power2_divisions, int(settings.expandable_segments),
         -1 if limit is None else limit, int(per_process), int(use_hints), int(hints_per_process),
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
