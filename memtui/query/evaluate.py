"""Syntax tree → boolean mask over one device's trace.

Column terms are single numpy expressions over the trace columns. Frame terms
(``file:``, ``func:``, ``frame:`` and bare words) are decided once per distinct frame,
reduced to one answer per interned stack, and broadcast to events through the stack
column; ``ctx:``/``meta:`` are decided once per interned string. Nothing loops over
events in Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import cast

import numpy as np

from memtui.model import Snapshot, metadata
from memtui.model.lifetimes import NONE
from memtui.model.segments import PoolId, pool_kind
from memtui.model.trace_figures import has_forward_frames
from memtui.query.nodes import And, FilterError, Flag, MatchAll, Node, Not, Or, Term
from memtui.query.values import AddressValue, FileValue, PoolValue, Range


class EvalContext:
    """One device of one snapshot, with the per-call caches the terms share."""

    def __init__(self, snapshot: Snapshot, device: int) -> None:
        self.snapshot = snapshot
        self.device = device
        self.dev = snapshot.devices[device]
        self.trace = self.dev.trace
        self.n = len(self.trace)
        self._lower_strings: list[str] | None = None
        self._stack_of_flat: np.ndarray | None = None

    def none(self) -> np.ndarray:
        return np.zeros(self.n, bool)

    def all(self) -> np.ndarray:
        return np.ones(self.n, bool)

    def lower_strings(self) -> list[str]:
        if self._lower_strings is None:
            self._lower_strings = [s.lower() for s in self.snapshot.strings.values]
        return self._lower_strings

    def string_mask(self, predicate: Callable[[str], bool]) -> np.ndarray:
        """Per string id: does ``predicate(lowercased string)`` hold."""
        return np.fromiter((predicate(s) for s in self.lower_strings()), bool, len(self.snapshot.strings))

    def events_with_stack(self, frame_match: np.ndarray) -> np.ndarray:
        """Events whose stack, or forward traceback (``forward_frames``: a backward
        allocation's forward line), has at least one frame where ``frame_match`` is True."""
        stacks = self.snapshot.stacks
        if self._stack_of_flat is None:
            self._stack_of_flat = np.repeat(np.arange(len(stacks), dtype=np.int64), np.diff(stacks.offsets))
        hits = np.bincount(self._stack_of_flat, weights=frame_match[stacks.flat], minlength=len(stacks)) > 0
        # Index len(stacks) stands for "no stack" (id -1) and never matches.
        per_stack = np.append(hits, False)
        sid = self.trace.stack
        mask: np.ndarray = per_stack[np.where(sid >= 0, sid, len(stacks))]
        fwd = self.trace.fwd
        if has_forward_frames(fwd):
            mask |= per_stack[np.where(fwd >= 0, fwd, len(stacks))]
        return mask


def evaluate(node: Node, ctx: EvalContext) -> np.ndarray:
    if isinstance(node, MatchAll):
        return ctx.all()
    if isinstance(node, And):
        mask = evaluate(node.children[0], ctx)
        for child in node.children[1:]:
            mask &= evaluate(child, ctx)
        return mask
    if isinstance(node, Or):
        mask = evaluate(node.children[0], ctx)
        for child in node.children[1:]:
            mask |= evaluate(child, ctx)
        return mask
    if isinstance(node, Not):
        return ~evaluate(node.child, ctx)
    if isinstance(node, Flag):
        return _FLAGS[node.name](ctx)
    if isinstance(node, Term):
        return _TERMS[node.field](ctx, node)
    raise TypeError(f"not a filter node: {node!r}")


# -- column terms ------------------------------------------------------------------------
# A Term's value is the type parser.py's _parse_value makes for its field (a Range, a tuple of ints
# or names, an AddressValue, a PoolValue, a FileValue or a lower-cased string): each term
# casts it to that type.


def _range_mask(column: np.ndarray, r: Range) -> np.ndarray:
    mask: np.ndarray | None = None
    if r.lo is not None:
        mask = column > r.lo if r.lo_open else column >= r.lo
    if r.hi is not None:
        upper = column < r.hi if r.hi_open else column <= r.hi
        mask = upper if mask is None else mask & upper
    return cast(np.ndarray, mask)  # parse_range never makes a range without a bound


def _equals(column: np.ndarray, value: int) -> np.ndarray:
    # A value the column's integer type cannot hold (a negative number against uint64,
    # a 65-bit address against int64) matches nothing rather than failing.
    try:
        equal: np.ndarray = column == value
        return equal
    except OverflowError:
        return np.zeros(len(column), bool)


def _any_equal(column: np.ndarray, values: Iterable[int]) -> np.ndarray:
    mask = np.zeros(len(column), bool)
    for value in values:
        mask |= _equals(column, value)
    return mask


def term_action(ctx: EvalContext, term: Term) -> np.ndarray:
    names = ctx.snapshot.actions.names
    codes: list[int] = []
    for wanted in cast(tuple[str, ...], term.value):
        found = [code for code, name in enumerate(names) if name == wanted or name.startswith(wanted + "_")]
        if not found:
            raise FilterError(f"unknown action {wanted!r}; actions are {', '.join(names)}", term.position,
                              expected="an action name")
        codes.extend(found)
    chosen = np.zeros(len(names), bool)
    chosen[codes] = True
    per_event: np.ndarray = chosen[ctx.trace.action]
    return per_event


def term_size(ctx: EvalContext, term: Term) -> np.ndarray:
    return _range_mask(ctx.trace.size, cast(Range, term.value))


def term_event(ctx: EvalContext, term: Term) -> np.ndarray:
    r = cast(Range, term.value)
    lo = 0 if r.lo is None else int(r.lo) + (1 if r.lo_open else 0)
    source = ctx.dev.source_index
    if source is not None:  # a reopened export: events keep the numbers they had in the source
        upper = (1 << 62) if r.hi is None else int(r.hi) + (0 if r.hi_open else 1)
        return (source >= lo) & (source < upper)
    hi = ctx.n if r.hi is None else int(r.hi) + (0 if r.hi_open else 1)
    mask = ctx.none()
    mask[max(lo, 0):max(min(hi, ctx.n), 0)] = True
    return mask


def term_time(ctx: EvalContext, term: Term) -> np.ndarray:
    # ``time:`` bounds count from the first event (the source's, for a reopened export).
    t0 = ctx.dev.time_origin_us
    if math.isnan(t0):
        return ctx.none()
    r = cast(Range, term.value)
    shifted = Range(None if r.lo is None else t0 + r.lo, None if r.hi is None else t0 + r.hi, r.lo_open, r.hi_open)
    return _range_mask(ctx.trace.time_us, shifted)


def term_stream(ctx: EvalContext, term: Term) -> np.ndarray:
    return _any_equal(ctx.trace.stream, cast(tuple[int, ...], term.value))


def term_device(ctx: EvalContext, term: Term) -> np.ndarray:
    return ctx.all() if ctx.device in cast(tuple[int, ...], term.value) else ctx.none()


def term_addr(ctx: EvalContext, term: Term) -> np.ndarray:
    value = cast(AddressValue, term.value)
    if value.has_version:
        return term_id(ctx, term)
    for address, _ in value.candidates:
        mask = _equals(ctx.trace.addr, address)
        if mask.any():
            return mask
    return ctx.none()


def term_id(ctx: EvalContext, term: Term) -> np.ndarray:
    """Events of one allocation (``addr_n``) or of every allocation at an address."""
    value = cast(AddressValue, term.value)
    dev = ctx.dev
    for address, version in value.candidates:
        at_address = _equals(ctx.trace.addr, address)
        lives = (dev.segment_lives,) if value.segment_hint else (dev.lives, dev.segment_lives)
        for life_table in lives:
            versions = life_table.event_version
            mask: np.ndarray = at_address & ((versions != NONE) if version is None else (versions == version))
            if mask.any():
                return mask
    return ctx.none()


def term_seg(ctx: EvalContext, term: Term) -> np.ndarray:
    """Events whose address lies in a segment that starts at the given address."""
    dev = ctx.dev
    for address, _ in cast(AddressValue, term.value).candidates:
        sizes = [int(s) for s in dev.segments.total_size[_equals(dev.segments.address, address)]]
        sizes += [int(s) for s in dev.segment_lives.size[_equals(dev.segment_lives.addr, address)]]
        if sizes:
            return _in_ranges(ctx.trace.addr, [address], [address + max(sizes)])
    return ctx.none()


def pool_matches(pool: PoolId, value: PoolValue) -> bool:
    """Does torch's ``segment_pool_id`` ``pool`` match a ``pool:`` value?"""
    pool = tuple(pool)
    if value.kind is None:
        return bool(pool[:len(value.prefix)] == value.prefix)
    kind = pool_kind(pool)
    if value.kind == "private":
        return kind != "default"
    if kind != value.kind:
        return False
    if value.number is None:
        return True
    return bool((pool[0] if kind == "graph" else pool[-1]) == value.number)


def term_pool(ctx: EvalContext, term: Term) -> np.ndarray:
    """Events of a matching pool: the ``pool_id`` an entry carries (newer torch), else the
    pool of the snapshot-time segment its address lies in."""
    segs = ctx.dev.segments
    value = cast(PoolValue, term.value)
    wanted = [i for i, pool in enumerate(segs.pools) if pool_matches(pool, value)]
    chosen = np.nonzero(np.isin(segs.pool, wanted))[0]
    starts = [int(segs.address[i]) for i in chosen]
    ends = [int(segs.address[i]) + int(segs.total_size[i]) for i in chosen]
    mask = _in_ranges(ctx.trace.addr, starts, ends)
    trace = ctx.trace
    if trace.pools:
        own = np.array([pool_matches(pool, value) for pool in trace.pools] + [False], np.bool_)
        has = trace.pool >= 0
        mask = np.where(has, own[np.where(has, trace.pool, -1)], mask)
    return mask


def _in_ranges(column: np.ndarray, starts: list[int], ends: list[int]) -> np.ndarray:
    """``column`` values inside any of the disjoint [start, end) ranges."""
    if not starts or len(column) == 0:
        return np.zeros(len(column), bool)
    order = sorted(range(len(starts)), key=starts.__getitem__)
    try:
        lo = np.array([starts[i] for i in order], dtype=column.dtype)
        hi = np.array([ends[i] for i in order], dtype=column.dtype)
    except OverflowError:
        # Bounds past the column's integer type (a segment ending at 2**64): exact Python ints.
        column = column.astype(object)
        lo = np.array([starts[i] for i in order], dtype=object)
        hi = np.array([ends[i] for i in order], dtype=object)
    slot = np.searchsorted(lo, column, "right") - 1
    inside: np.ndarray = (slot >= 0) & (column < hi[np.maximum(slot, 0)])
    return inside


# -- strings and stacks ------------------------------------------------------------------------


def term_ctx(ctx: EvalContext, term: Term) -> np.ndarray:
    text = cast(str, term.value)
    found: np.ndarray = ctx.string_mask(lambda s: text in s)[ctx.trace.ctx]
    return found


def term_meta(ctx: EvalContext, term: Term) -> np.ndarray:
    """``user_metadata`` as text, or ``key=value`` of structured metadata (model/metadata.py);
    an allocation an ``annotate`` entry labelled so matches with all its events."""
    text = cast(str, term.value)
    strings = ctx.snapshot.strings
    raw = strings.raw
    hit = np.fromiter((metadata.matches(raw(i), text) for i in range(len(strings))), np.bool_, len(strings))
    mask: np.ndarray = hit[ctx.trace.meta]
    notes = ctx.dev.annotations
    if len(notes):
        lives = notes.life[hit[ctx.trace.meta[notes.event]] & (notes.life != NONE)]
        if len(lives):
            labelled = np.zeros(len(ctx.dev.lives), bool)
            labelled[lives] = True
            mask |= _per_event(ctx.dev.lives.event_life, labelled)
    return mask


def term_file(ctx: EvalContext, term: Term) -> np.ndarray:
    value = cast(FileValue, term.value)
    frames = ctx.snapshot.frames
    match = ctx.string_mask(lambda s: value.text in s)[frames.filename] if len(frames) else np.zeros(0, bool)
    if value.line is not None:
        match &= frames.line == value.line
    return ctx.events_with_stack(match)


def term_func(ctx: EvalContext, term: Term) -> np.ndarray:
    text = cast(str, term.value)
    frames = ctx.snapshot.frames
    match = ctx.string_mask(lambda s: text in s)[frames.name] if len(frames) else np.zeros(0, bool)
    return ctx.events_with_stack(match)


def term_frame(ctx: EvalContext, term: Term) -> np.ndarray:
    """Substring of a frame as shown: ``filename:line function``."""
    return ctx.events_with_stack(ctx.snapshot.frames.text_matches(cast(str, term.value)))


# -- lifetimes ------------------------------------------------------------------------------------


def _per_event(event_life: np.ndarray, per_life: np.ndarray) -> np.ndarray:
    """``per_life[life]`` for each event; False for events that belong to no life.

    The appended False sits at index -1, which is exactly NONE, so one gather does it.
    """
    found: np.ndarray = np.append(per_life, False)[event_life]
    return found


def flag_live(ctx: EvalContext) -> np.ndarray:
    """The event's allocation or segment is not freed in the trace: still there at snapshot time."""
    dev = ctx.dev
    live: np.ndarray = (_per_event(dev.lives.event_life, dev.lives.end == NONE)
                        | _per_event(dev.segment_lives.event_life, dev.segment_lives.end == NONE))
    return live


def flag_freed(ctx: EvalContext) -> np.ndarray:
    """The free that ends the event's allocation or segment is in the trace."""
    dev = ctx.dev
    freed: np.ndarray = (_per_event(dev.lives.event_life, dev.lives.end != NONE)
                         | _per_event(dev.segment_lives.event_life, dev.segment_lives.end != NONE))
    return freed


def flag_leaked(ctx: EvalContext) -> np.ndarray:
    """Block allocations made in the trace that the program never asked to free."""
    lives = ctx.dev.lives
    never_freed = (lives.start != NONE) & (lives.request == NONE) & (lives.end == NONE)
    return _per_event(lives.event_life, never_freed)


_TERMS = {
    "action": term_action, "size": term_size, "event": term_event, "time": term_time,
    "stream": term_stream, "device": term_device, "addr": term_addr, "id": term_id,
    "seg": term_seg, "pool": term_pool, "ctx": term_ctx, "meta": term_meta,
    "file": term_file, "func": term_func, "frame": term_frame,
}
_FLAGS = {"live": flag_live, "freed": flag_freed, "leaked": flag_leaked}
