"""What is allocated when: the per-event allocated curve and the lives behind it.

Bytes are the allocator's block sizes (requests rounded up as the caching allocator
does, exact for blocks still live at snapshot time), so the curve's peak is what
``torch.cuda.max_memory_allocated`` reports. An allocation stops counting as allocated
at its ``free_requested``: a block whose free waits on another stream is no longer the
program's, even while the allocator cannot reuse it yet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from memtui.compiled import native as _native
from memtui.cores import usable_cores
from memtui.model import DeviceModel, column_passes
from memtui.model import actions as act
from memtui.model.columns import INT64_MAX
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED
from memtui.replay import block_bytes

# The compiled curves (src/memtui_native/curves.c) are used when they are there: numpy makes
# the same curves from temporaries of every event, 0.63 s against 0.28 s at 10M events here
# (tests and MEMTUI_NO_NATIVE=1 turn them off).
use_native = _native is not None and not os.environ.get("MEMTUI_NO_NATIVE")


@dataclass
class LifeSpans:
    """For every life of a device: [start, stop) in event indices, bytes and stack.

    ``start`` is -1 for memory allocated before the trace begins; ``stop`` is the
    number of events for memory still allocated when the snapshot was taken.
    """

    start: np.ndarray
    stop: np.ndarray
    size: np.ndarray
    stack: np.ndarray
    n_events: int

    def __len__(self) -> int:
        return len(self.start)

    def live_at(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For sorted event indices ``points``: the [first, last) range of points each life spans."""
        first = np.searchsorted(points, self.start, "left")
        last = np.searchsorted(points, self.stop, "left")
        return first, last


@dataclass
class LifeBounds:
    """:class:`LifeSpans` without the stacks: all the allocated curve needs."""

    start: np.ndarray
    stop: np.ndarray
    size: np.ndarray
    n_events: int


def life_bounds(dev: DeviceModel, life_bytes: np.ndarray | None = None) -> LifeBounds:
    """[start, stop) and bytes of every life, and of the blocks allocated at snapshot time
    that no life accounts for (allocated before the trace began and never freed in it).
    ``life_bytes``: :func:`memtui.replay.block_bytes` of ``dev`` where the caller has it."""
    lives = dev.lives
    n = len(dev.trace)
    stop = np.where(lives.request != NONE, lives.request, lives.end).astype(np.int64)
    stop[stop == NONE] = n
    untraced = _untraced_blocks(dev)
    return LifeBounds(
        start=np.concatenate([lives.start.astype(np.int64), np.full(len(untraced), -1, np.int64)]),  # NONE is -1
        stop=np.concatenate([stop, np.full(len(untraced), n, np.int64)]),
        size=np.concatenate([block_bytes(dev) if life_bytes is None else life_bytes,
                             dev.blocks.size[untraced].astype(np.int64)]),
        n_events=n,
    )


def _untraced_blocks(dev: DeviceModel) -> np.ndarray:
    """The snapshot's allocated blocks that no life of the trace accounts for, in the
    order :func:`life_bounds` appends them after the lives."""
    return np.nonzero((dev.blocks.state == ALLOCATED) & (dev.block_life == NONE))[0]


def life_spans(dev: DeviceModel, life_bytes: np.ndarray | None = None) -> LifeSpans:
    """:func:`life_bounds` with the stack of every life."""
    bounds = life_bounds(dev, life_bytes)
    lives = dev.lives
    n = bounds.n_events
    start, stop = bounds.start[:len(lives)], bounds.stop[:len(lives)]
    # A life whose alloc was cut off by the ring buffer takes its stack from any of its events.
    # Stacks are the ones that name each allocation (a backward allocation's forward traceback
    # where it has one: model/relevance.py), so call sites group them by the forward line.
    stack_event = np.where(start != NONE, start, np.minimum(stop, max(n - 1, 0)))
    stack = dev.site_stack[stack_event].astype(np.int32) if n else np.zeros(0, np.int32)
    # The snapshot's block table knows the stack of a live block even when its alloc fell out.
    block_stack = dev.block_site_stack
    linked = np.nonzero(dev.block_life != NONE)[0]
    lives_linked = dev.block_life[linked]
    stack[lives_linked] = np.where(stack[lives_linked] >= 0, stack[lives_linked], block_stack[linked])
    untraced = _untraced_blocks(dev)
    return LifeSpans(start=bounds.start, stop=bounds.stop, size=bounds.size,
                     stack=np.concatenate([stack, block_stack[untraced].astype(np.int32)]), n_events=n)


def allocated_curve(dev: DeviceModel, spans: LifeSpans | LifeBounds | None = None,
                    life_bytes: np.ndarray | None = None, threads: int | None = None) -> np.ndarray:
    """Allocated bytes after each event (int64, one value per event), from ``spans`` where
    the caller has them, else from the lives (``life_bytes`` as in :func:`life_bounds`).
    ``threads``: the cores the compiled pass may use (all the process's by default).

    A filtered export cannot be replayed (DeviceModel.partial_trace): its curve is the
    source's figure at the end, flat, rather than a sum of the lives it happens to hold.
    """
    if dev.partial_trace:
        return np.full(len(dev.trace), dev.allocated, np.int64)
    if use_native:
        return _compiled_allocated_curve(dev, spans, life_bytes, threads or usable_cores())
    spans = spans if spans is not None else life_bounds(dev, life_bytes)
    n = spans.n_events
    if n == 0:
        return np.zeros(0, np.int64)
    started = spans.start >= 0
    # Sums by event through bincount (many times faster than np.add.at at 10M lives). Its
    # float64 sums are exact: each is a few block sizes, far below 2**53.
    # Fresh memory is dear at 10M events (each 80 MB array is page-faulted in), so the sums
    # are made in as few arrays as they can: one column of changes, one curve.
    sizes = spans.size.astype(np.float64)
    # (float64 even with no weights to sum: bincount of nothing gives integers)
    delta = np.bincount(spans.start[started], weights=sizes[started], minlength=n + 1).astype(np.float64, copy=False)
    delta -= np.bincount(spans.stop, weights=sizes, minlength=n + 1)
    # Exact: whole bytes far below 2**53. A file whose sizes add up past 2**63 (memtui check
    # says what is wrong with it) gets a curve as meaningless as they are, without a warning.
    with np.errstate(invalid="ignore"):
        curve = np.cumsum(delta[:n], out=delta[:n]).astype(np.int64)
    curve += int(spans.size[~started].sum())
    return curve


def _compiled_allocated_curve(dev: DeviceModel, spans: LifeSpans | LifeBounds | None,
                              life_bytes: np.ndarray | None, threads: int) -> np.ndarray:
    """:func:`allocated_curve` by the compiled pass: the same bounds as :func:`life_bounds`
    (a life stops at its free_requested, else at its free_completed), read from the lives
    themselves, without the bounds' columns of every life."""
    if spans is not None:
        curve = _native.allocated_curve(spans.start, spans.stop, spans.stop, spans.size, spans.n_events, 0, threads)
        return np.frombuffer(curve, np.int64)
    lives = dev.lives
    sizes = block_bytes(dev) if life_bytes is None else life_bytes
    # The blocks allocated before the trace that no life accounts for are held throughout.
    untraced = int(dev.blocks.size[_untraced_blocks(dev)].astype(np.int64).sum())
    curve = _native.allocated_curve(lives.start, lives.request, lives.end, sizes, len(dev.trace), untraced, threads)
    return np.frombuffer(curve, np.int64)


@dataclass
class Peak:
    index: int  # event after which allocated memory was highest (-1: no trace)
    allocated: int
    time_us: float


def allocated_peak(dev: DeviceModel, curve: np.ndarray | None = None) -> Peak:
    curve = allocated_curve(dev) if curve is None else curve
    if len(curve) == 0:
        return Peak(-1, dev.allocated, float("nan"))
    i = int(np.argmax(curve))
    return Peak(i, int(curve[i]), float(dev.trace.time_us[i]))


def reserved_curve(dev: DeviceModel, threads: int | None = None) -> np.ndarray:
    """Reserved bytes (segments) after each event (``threads``: as for :func:`allocated_curve`).

    Summed from the segment events themselves rather than from paired lives: with
    expandable segments an unmap may release part of a mapped range, so maps and
    unmaps do not pair by address. The curve ends at the snapshot's own figure.
    """
    trace = dev.trace
    n = len(trace)
    if n == 0:
        return np.zeros(0, np.int64)
    if dev.partial_trace:
        return np.full(n, dev.reserved, np.int64)
    if use_native:
        # The lift first, from the segment events alone, so the curve is written once, lifted.
        signs = _segment_signs(0)  # a code past its end is no segment event
        events = column_passes.positions(trace.action, tuple(int(code) for code in np.flatnonzero(signs)))
        end = int((signs[trace.action[events]] * trace.size[events].astype(np.int64)).sum())
        curve = _native.reserved_curve(trace.action, trace.size, signs.tobytes(), _lift(dev, end),
                                       threads or usable_cores())
        return np.frombuffer(curve, np.int64)
    # Segment events are few: their signed sizes go into one zeroed column, summed once.
    sign = _segment_signs(int(trace.action.max()))[trace.action]
    events = np.flatnonzero(sign)
    curve = np.zeros(n, np.int64)
    curve[events] = sign[events] * trace.size[events].astype(np.int64)
    np.cumsum(curve, out=curve)
    curve += _lift(dev, int(curve[-1]))
    return curve


def _lift(dev: DeviceModel, end: int) -> int:
    """What the reserved curve is raised by, so that it ends at the snapshot's own figure where
    the trace's segment events alone end below it (segments mapped before the trace began).
    Sizes near 2^63 (a hostile trace) take the two figures apart by more than an int64
    holds: the lift is kept to what one holds."""
    return min(max(dev.reserved - end, 0), INT64_MAX)


def _segment_signs(highest_code: int) -> np.ndarray:
    """+1 for each action code that maps segment memory, -1 for each that releases it, 0 for
    the others, for the codes up to ``highest_code`` and every segment action's."""
    signs = np.zeros(max(highest_code, max(act.SEGMENT_ACTIONS)) + 1, np.int8)
    signs[list(act.SEGMENT_START)] = 1
    signs[list(act.SEGMENT_END)] = -1
    return signs
