"""address_n identifiers and the pairing of allocations with their frees.

Following memory_viz, every address has a version counter: an ``alloc`` or
``free_requested`` takes the current version, a ``free_completed`` takes it and then
increments it. ``7f064c000000_3`` is therefore the fourth life of that address in the
trace, and one string names one allocation from alloc to free. A trace cut by the ring
buffer may start with frees whose alloc is gone: they simply form a life with no start.

All of this is vectorised: events are sorted by (address, index) once and versions come
from a cumulative count of the ending events inside each address run. Where memtui was
built with its compiled part (``memtui._native``, docs/performance.md), the same arrays
come from a hash map of addresses and a counting sort instead of a sort of every event:
ten times faster on ten million events. Tests check that both give the same arrays.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.compiled import native as _native
from memtui.model import column_passes
from memtui.model.columns import narrow_type, sort_codes

NONE = -1
# The compiled pairing is used when it is there (tests and MEMTUI_NO_NATIVE=1 turn it off).
use_native = _native is not None and not os.environ.get("MEMTUI_NO_NATIVE")
# From this many events, lives said to be few (compute_lifetimes's ``few``) are paired on
# their own events when these are at most SPARSE_SHARE of the trace (tests lower it too).
SPARSE_FROM = 1 << 16
SPARSE_SHARE = 0.25


@dataclass
class Lifetimes:
    """One row per life (address, version), sorted by address then version.

    ``start``/``request``/``end`` are trace indices (NONE when not in the trace), int32
    below 2**31 events. ``event_version``/``event_life`` map each trace event back to its
    life (NONE for events of other kinds), as narrow as their values allow
    (model/columns.py narrowest): widen them before arithmetic past +-1.
    """

    addr: np.ndarray
    version: np.ndarray
    start: np.ndarray
    request: np.ndarray
    end: np.ndarray
    size: np.ndarray
    event_version: np.ndarray
    event_life: np.ndarray

    def __len__(self) -> int:
        return len(self.addr)

    def find(self, addr: int, version: int) -> int:
        """Index of the life (addr, version), or NONE."""
        lo, hi = self.address_range(addr)
        if lo == hi:
            return NONE
        pos = lo + int(np.searchsorted(self.version[lo:hi], version))
        if pos < hi and int(self.version[pos]) == version:
            return pos
        return NONE

    def address_range(self, addr: int) -> tuple[int, int]:
        """[lo, hi) of the lives at ``addr``."""
        if len(self.addr) == 0:
            return 0, 0
        try:
            key = self.addr.dtype.type(addr) if self.addr.dtype != object else addr
        except (OverflowError, ValueError):
            return 0, 0
        lo = int(np.searchsorted(self.addr, key, "left"))
        hi = int(np.searchsorted(self.addr, key, "right"))
        return lo, hi

    def ends_at_address(self, addr: int) -> int:
        """How many lives at ``addr`` ended in the trace: the version a new life would get."""
        lo, hi = self.address_range(addr)
        return int(np.count_nonzero(self.end[lo:hi] != NONE))


def compute_lifetimes(
    action: np.ndarray,
    addr: np.ndarray,
    size: np.ndarray,
    start_codes: tuple[int, ...],
    request_codes: tuple[int, ...],
    end_codes: tuple[int, ...],
    threads: int = 1,
    few: bool = False,
) -> Lifetimes:
    """``threads``: how many the compiled pairing uses (memtui.cores.pairing_threads). ``few``: the
    caller expects these events to be a small part of the trace (the segments' among the
    blocks'); where they are, only they are paired (the answer is the same)."""
    if few and len(action) >= SPARSE_FROM:
        # In trace order, one compiled pass on the cores (model/column_passes.py): no sort.
        taking_part = column_passes.positions(action, tuple(set(start_codes + request_codes + end_codes)))
        if len(taking_part) <= len(action) * SPARSE_SHARE:
            return _lifetimes_of_some(taking_part, action, addr, size, start_codes, request_codes, end_codes)
    if use_native and addr.dtype == np.int64 and len(action) < 2**31 - 1:
        lives = _native_lifetimes(action, addr, size, start_codes, request_codes, end_codes, threads)
    else:
        lives = numpy_lifetimes(action, addr, size, start_codes, request_codes, end_codes)
    return _narrow(lives, len(action))


def _lifetimes_of_some(taking_part: np.ndarray, action: np.ndarray, addr: np.ndarray, size: np.ndarray,
                       start_codes: tuple[int, ...], request_codes: tuple[int, ...],
                       end_codes: tuple[int, ...]) -> Lifetimes:
    """The lives of the events at ``taking_part`` (every event of these codes, in order):
    paired among themselves, their trace indices and per-event columns mapped back. Two
    per-event columns of one byte each instead of a pass writing two of four bytes."""
    some = compute_lifetimes(action[taking_part], addr[taking_part], size[taking_part], start_codes,
                             request_codes, end_codes)
    n = len(action)

    def in_trace(positions: np.ndarray) -> np.ndarray:
        found = positions != NONE
        out = np.full(len(positions), NONE, np.int32 if n < 2**31 else np.int64)
        out[found] = taking_part[positions[found]]
        return out

    def per_event(values: np.ndarray) -> np.ndarray:
        out = np.full(n, NONE, values.dtype)  # narrow already: NONE fits every narrowest dtype
        out[taking_part] = values
        return out

    return Lifetimes(addr=some.addr, version=some.version, start=in_trace(some.start),
                     request=in_trace(some.request), end=in_trace(some.end), size=some.size,
                     event_version=per_event(some.event_version), event_life=per_event(some.event_life))


def _narrow(lives: Lifetimes, n: int) -> Lifetimes:
    """Trace indices in int32 where they fit; per-event ids as narrow as they allow."""
    if n < 2**31:
        lives.start, lives.request, lives.end = (c.astype(np.int32, copy=False)
                                                 for c in (lives.start, lives.request, lives.end))
    # The bounds come from the lives, not from a pass over every event: an event has its
    # life's version, and every life has at least one event.
    top_version = int(lives.version.max()) if len(lives) else NONE
    lives.event_version = lives.event_version.astype(narrow_type(NONE, top_version), copy=False)
    lives.event_life = lives.event_life.astype(narrow_type(NONE, len(lives) - 1), copy=False)
    return lives


def _native_lifetimes(action: np.ndarray, addr: np.ndarray, size: np.ndarray, start_codes: tuple[int, ...],
                      request_codes: tuple[int, ...], end_codes: tuple[int, ...], threads: int = 1) -> Lifetimes:
    return from_native_pairing(_native.lifetimes(
        np.ascontiguousarray(action), np.ascontiguousarray(addr), np.ascontiguousarray(size), tuple(start_codes),
        tuple(request_codes), tuple(end_codes), threads))


def paired_elsewhere(paired: tuple[Any, ...], events: int) -> Lifetimes:
    """compute_lifetimes's answer from a compiled pairing made before the model (on the
    scan's thread, memtui/load/ahead.py) over the same ``events`` events."""
    return _narrow(from_native_pairing(paired), events)


def from_native_pairing(paired: tuple[Any, ...]) -> Lifetimes:
    """The lives from what the compiled pairing returns (``_native.lifetimes``), made
    elsewhere too: on the scan's thread, before numpy was imported (memtui/load/ahead.py)."""
    *parts, version_width, life_width = paired
    # The per-event columns come narrowed (their widths given), as _narrow would make them.
    by_width = {1: np.int8, 2: np.int16, 4: np.int32}
    dtypes = (np.int64, np.int32, np.int32, np.int32, np.int32, np.int64, by_width[version_width],
              by_width[life_width])
    a, version, start, request, end, life_size, event_version, event_life = (
        np.frombuffer(part, dtype) for part, dtype in zip(parts, dtypes))
    return Lifetimes(addr=a, version=version, start=start, request=request, end=end, size=life_size,
                     event_version=event_version, event_life=event_life)


def numpy_lifetimes(
    action: np.ndarray,
    addr: np.ndarray,
    size: np.ndarray,
    start_codes: tuple[int, ...],
    request_codes: tuple[int, ...],
    end_codes: tuple[int, ...],
) -> Lifetimes:
    """compute_lifetimes with numpy alone (every column type, addresses past 64 bits too)."""
    n = len(action)
    event_version = np.full(n, NONE, np.int32)
    event_life = np.full(n, NONE, np.int32)
    # Positions fit 32 bits (numpy's own 64-bit indices are converted at once): with ten
    # million events every temporary here is 40 MB instead of 80, and each is dropped as
    # soon as the next step no longer needs it.
    pos = np.int32 if n < 2**31 else np.int64
    idx = np.flatnonzero(np.isin(action, start_codes + request_codes + end_codes)).astype(pos)
    if len(idx) == 0:
        empty = np.zeros(0, pos)
        return Lifetimes(addr[:0], np.zeros(0, np.int32), empty, empty.copy(), empty.copy(), np.zeros(0, np.int64),
                         event_version, event_life)

    codes = sort_codes(addr[idx])
    order = np.argsort(codes, kind="stable")  # idx ascends, so ties keep trace order
    sorted_codes = codes[order]
    del codes
    sorted_idx = idx[order]
    del order, idx
    sorted_action = action[sorted_idx]

    new_addr = np.ones(len(sorted_idx), bool)
    new_addr[1:] = sorted_codes[1:] != sorted_codes[:-1]
    del sorted_codes
    is_end = np.isin(sorted_action, end_codes)
    ends_before = np.cumsum(is_end, dtype=pos) - is_end
    del is_end
    run = np.cumsum(new_addr, dtype=pos) - 1
    version = ends_before - ends_before[np.flatnonzero(new_addr)][run]
    del ends_before, run

    new_life = new_addr
    new_life[1:] |= version[1:] != version[:-1]
    life = np.cumsum(new_life, dtype=pos) - 1
    n_lives = int(life[-1]) + 1
    first = np.flatnonzero(new_life)
    del new_life, new_addr

    def first_of(codes_wanted: tuple[int, ...]) -> np.ndarray:
        out = np.full(n_lives, NONE, pos)
        m = np.flatnonzero(np.isin(sorted_action, codes_wanted))[::-1]
        out[life[m]] = sorted_idx[m]  # reversed, so the earliest event wins
        return out

    start = first_of(start_codes)
    request = first_of(request_codes) if request_codes else np.full(n_lives, NONE, pos)
    end = first_of(end_codes)
    # The size of a life is its start's size, or any of its events' when the start is gone.
    life_size = size[sorted_idx[first]].astype(np.int64)
    has_start = start != NONE
    life_size[has_start] = size[start[has_start]]

    event_version[sorted_idx] = version
    event_life[sorted_idx] = life
    life_addr = addr[sorted_idx[first]]
    return Lifetimes(
        addr=life_addr,
        version=version[first].astype(np.int32),
        start=start,
        request=request,
        end=end,
        size=life_size,
        event_version=event_version,
        event_life=event_life,
    )
