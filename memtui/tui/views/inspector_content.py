"""What the stack inspector says about an event, a block or a segment, as styled lines.

Pure: a line is a list of (text, style name) pairs; the widget maps style names to its
component classes. Keeping the wording here lets the detail screen and tests reuse it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from memtui.model import actions as act
from memtui.model import metadata
from memtui.model.lifetimes import NONE
from memtui.model.relevance import FORWARD_TEXT, FX_NODE_NAME, FX_NODE_OP, FX_NODE_TARGET, FX_ORIGINAL_TRACE
from memtui.model.segments import DEFAULT_POOL, pool_name
from memtui.model.snapshot import NOT_REPLAYED
from memtui.model.stackless import stackless_context
from memtui.model.strings import terminal_safe
from memtui.replay import AllocatorState
from memtui.state_figures import count_blocks, largest_free_text, pool_free, request_pool, segment_pools
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.segment_rows import StateLayout, state_name
from memtui.tui.views.stack_lines import collapse_repeats, source_context
from memtui.units import format_bytes, format_seconds

Line = list[tuple[str, str]]


@dataclass
class InspectOptions:
    show_native: bool = False
    show_source: bool = True


def _kv(label: str, value: str, style: str = "value") -> Line:
    return [(f"  {label:<16}", "label"), (value, style)]


def event_lines(view: DeviceView, i: int, state: AllocatorState, opts: InspectOptions) -> list[Line]:
    dev, snap = view.device, view.snapshot
    trace = dev.trace
    if not 0 <= i < len(trace):
        return [[("no event selected", "muted")]]
    code = int(trace.action[i])
    name = snap.actions.name(code)
    size = int(trace.size[i])
    head = f"event {dev.shown_index(i):,} · {name.upper() if code == act.OOM else name}"
    if size and code != act.SNAPSHOT:
        head += f" · {format_bytes(size)}"
    lines: list[Line] = [[(head, "error" if code == act.OOM else "title")]]
    address_n = dev.event_address_n(i)
    if address_n:
        lines.append(_kv("address_n", address_n, "value"))
    lines.append(_kv("stream", str(int(trace.stream[i]))))
    pool = dev.event_pool(i)
    if pool is not None and (tuple(pool) != DEFAULT_POOL or int(trace.pool[i]) >= 0):
        lines.append(_kv("pool", pool_name(pool)))
    t = view.relative_seconds(i)
    if math.isfinite(t):
        lines.append(_kv("time", format_seconds(t) + " after the first event"))
    if code == act.OOM:
        lines += oom_lines(view, i, state)
    lines += _context_lines(view, i)
    lines += _life_lines(view, i)
    lines += _annotation_lines(view, i)
    lines.append([])
    lines += stack_section(view, int(trace.stack[i]), f"stack of this {name}", opts, event=i)
    lines += forward_section(view, int(trace.fwd[i]))
    partner = _partner_event(view, i)
    if partner is not None:
        label, j = partner
        lines.append([])
        lines += stack_section(view, int(trace.stack[j]), f"{label} (event {dev.shown_index(j):,})", opts,
                               with_source=False,
                               event=j)
    return lines


def oom_lines(view: DeviceView, i: int, state: AllocatorState) -> list[Line]:
    """The figures that explain an OOM: what was asked, what the device and the cache had.

    Free memory serves only requests of its own pool and stream, so the free figures
    name theirs; they are the ones Why OOM (memtui oom) reports.
    """
    trace = view.device.trace
    requested = int(trace.size[i])
    device_free = int(trace.device_free[i])
    if view.device.partial_trace:  # the state at the OOM is not in a filtered export: only what the event says
        return [_kv("requested", format_bytes(requested), "error"),
                _kv("device free", format_bytes(device_free) if device_free >= 0 else "not recorded"),
                _kv("at the OOM", f"cannot tell: {NOT_REPLAYED}")]
    pools = segment_pools(state, view.device, view.snapshot.strings)
    usable = pool_free(state, pools, request_pool(requested), int(trace.stream[i]))
    cached_free = state.reserved - state.active
    lines = [
        _kv("requested", f"{format_bytes(requested)} (from the {usable.label})", "error"),
        _kv("device free", format_bytes(device_free) if device_free >= 0 else "not recorded"),
        _kv("reserved", format_bytes(state.reserved)),
        _kv("allocated", format_bytes(state.allocated)),
        _kv("active", format_bytes(state.active)),
        _kv("free in cache", f"{format_bytes(cached_free)} in all pools, {format_bytes(usable.free)} in the"
            f" {usable.label}"),
        _kv("largest free", largest_free_text(state, pools, usable)),  # one free block, per pool
    ]
    return lines


def _context_lines(view: DeviceView, i: int) -> list[Line]:
    strings = view.snapshot.strings
    lines = []
    ctx = strings[int(view.device.trace.ctx[i])]
    if ctx and ctx != "N/A":
        lines.append(_kv("compile context", ctx))
    meta = strings[int(view.device.trace.meta[i])]
    if meta:
        label = "label" if int(view.device.trace.action[i]) == act.ANNOTATE else "user metadata"
        lines.append(_kv(label, metadata.display(meta)))
    return lines


def _annotation_lines(view: DeviceView, i: int) -> list[Line]:
    """For an ``annotate`` entry, what it labels; for an allocation's events, its labels."""
    dev = view.device
    notes = dev.annotations
    if not len(notes):
        return []
    if int(dev.trace.action[i]) == act.ANNOTATE:
        row = notes.row_of_event(i)
        target = dev.event_address_n(i)
        if row == NONE or not target:
            return [_kv("labels", "no allocation live at this address", "warn")]
        ghost = int(notes.life[row]) == NONE
        return [_kv("labels", target + (f" ({dev.alloc_not_in_trace()})" if ghost else ""))]
    life = int(dev.lives.event_life[i])
    if life == NONE:
        return []
    return label_lines(view, notes.of_life(life))


def label_lines(view: DeviceView, events) -> list[Line]:
    """One line per ``annotate`` entry: its label and where it was recorded."""
    dev = view.device
    strings = view.snapshot.strings
    return [_kv("annotation", f"{metadata.display(strings[int(dev.trace.meta[int(j)])])}"
                f" (event {dev.shown_index(int(j)):,})") for j in events]


def _life_lines(view: DeviceView, i: int) -> list[Line]:
    dev = view.device
    for lives, names in ((dev.lives, ("alloc", "free requested", "free completed")),
                         (dev.segment_lives, ("segment alloc", "", "segment free"))):
        life = int(lives.event_life[i])
        if life == NONE:
            continue
        steps = []
        for label, column in zip(names, (lives.start, lives.request, lives.end)):
            if label and int(column[life]) != NONE:
                j = int(column[life])
                if int(dev.trace.action[j]) == act.FREE_REQUESTED:
                    label = "free requested"  # the end of a trace recorded without free_completed
                steps.append(f"{label} {dev.shown_index(j):,}")
        if int(lives.start[life]) == NONE:
            steps.insert(0, dev.alloc_not_in_trace())
        if int(lives.end[life]) == NONE:
            steps.append("still live at snapshot time")
        return [_kv("life", " → ".join(steps))]
    return []


def _partner_event(view: DeviceView, i: int) -> tuple[str, int] | None:
    """The other end of this event's allocation: its alloc for a free, its free for an alloc."""
    dev = view.device
    for lives in (dev.lives, dev.segment_lives):
        life = int(lives.event_life[i])
        if life == NONE:
            continue
        start = int(lives.start[life])
        free = int(lives.request[life]) if int(lives.request[life]) != NONE else int(lives.end[life])
        if i == start and free != NONE:
            return "freed at", free
        if i != start and start != NONE:
            return "allocated at", start
    return None


def block_lines(view: DeviceView, state: AllocatorState, block: int, opts: InspectOptions) -> list[Line]:
    dev = view.device
    life = int(state.blk_life[block])
    final = int(state.blk_final[block])
    address_n = (f"{int(dev.lives.addr[life]):x}_{int(dev.lives.version[life])}" if life != NONE
                 else dev.block_address_n(final) if final != NONE else f"{int(state.blk_addr[block]):x}")
    lines: list[Line] = [[(f"block {address_n} · {format_bytes(int(state.blk_size[block]))} · "
                           f"{state_name(int(state.blk_state[block]))}", "title")]]
    lines.append(_kv("address", f"{int(state.blk_addr[block]):#x}"))
    seg = int(state.blk_segment[block])
    if seg != NONE:
        lines.append(_kv("segment", f"{int(state.seg_addr[seg]):x} ({format_bytes(int(state.seg_size[seg]))})"))
    start = int(dev.lives.start[life]) if life != NONE else NONE
    if life != NONE:
        lines.append(_kv("requested", format_bytes(int(dev.lives.size[life]))))
        lines += _life_lines(view, start if start != NONE else int(dev.lives.end[life]) if int(
            dev.lives.end[life]) != NONE else int(dev.lives.request[life]))
    ghost = life == NONE and final != NONE and bool(dev.ghost_blocks[final])
    if ghost:
        lines.append(_kv("ghost block", "in the snapshot's segment list, no event in the trace: allocated "
                         "before recording began or its alloc fell off the ring buffer", "warn"))
    if len(dev.annotations):
        notes = dev.annotations.of_life(life, state.index) if life != NONE else \
            dev.annotations.of_block(final, state.index) if final != NONE else []
        lines += label_lines(view, notes)
    lines.append([])
    if start != NONE:
        lines += stack_section(view, int(dev.trace.stack[start]), f"allocated at event {dev.shown_index(start):,}",
                               opts,
                               event=start)
        lines += forward_section(view, int(dev.trace.fwd[start]))
    elif final != NONE:
        title = ("ghost block: " if ghost else "") + dev.alloc_not_in_trace()
        if int(dev.blocks.stack[final]) < 0 and ghost:
            lines += [[(title, "section")], [("  no stack: the trace never saw this allocation", "muted")]]
        else:
            lines += stack_section(view, int(dev.blocks.stack[final]), title, opts)
        lines += forward_section(view, int(dev.blocks.fwd[final]))
    else:
        lines.append([("  no allocation stack recorded", "muted")])
    return lines


def segment_lines(view: DeviceView, state: AllocatorState, segment: int, opts: InspectOptions) -> list[Line]:
    dev = view.device
    addr, size = int(state.seg_addr[segment]), int(state.seg_size[segment])
    layout = StateLayout(state)
    free, largest = layout.free_figures(segment)
    pools = segment_pools(state, dev, view.snapshot.strings)
    lines: list[Line] = [[(f"segment {addr:x} · {format_bytes(size)}", "title")]]
    lines.append(_kv("pool", f"{pools.name(segment)}" + ("" if pools.private[segment] else
                                                         f", {pools.pool_label(segment)}")))
    lines.append(_kv("blocks", count_blocks(state, segment).blocks_text()))
    lines.append(_kv("free", f"{format_bytes(free)}, largest free block {format_bytes(largest)}"))
    lines.append(_kv("stream", str(int(state.seg_stream[segment]))))
    if bool(state.seg_expandable[segment]):
        lines.append(_kv("expandable", "yes (mapped with segment_map)"))
    lines.append([])
    lo, hi = dev.segment_lives.address_range(addr)
    start = NONE
    for life in range(lo, hi):
        s, e = int(dev.segment_lives.start[life]), int(dev.segment_lives.end[life])
        if s != NONE and s <= state.index and (e == NONE or e > state.index):
            start = s
    final = int(state.seg_final[segment])
    if start != NONE:
        lines += stack_section(view, int(dev.trace.stack[start]),
                               f"segment allocated at event {dev.shown_index(start):,}", opts)
    elif final != NONE:
        lines += stack_section(view, int(dev.segments.stack[final]), f"segment {dev.alloc_not_in_trace()}", opts)
    return lines


def stack_section(view: DeviceView, sid: int, title: str, opts: InspectOptions,
                  with_source: bool = True, event: int | None = None) -> list[Line]:
    """A stack's frames under ``title``; for an ``event`` recorded without one, what is
    known instead (model/stackless.py), with the main thread's stack when it was in backward()."""
    stacks = view.snapshot.stacks
    frames = stacks.frames
    lines: list[Line] = [[(title, "section")]]
    if sid < 0:
        context = stackless_context(view.snapshot, view.device.device, event) if event is not None else None
        if context is None:
            return lines + [[("  no stack recorded", "muted")]]
        lines.append([(f"  {context.note}", "muted")])
        if context.in_backward:
            lines.append([])
            lines += stack_section(view, int(view.device.trace.stack[context.event]),
                                   f"main thread in backward() (event {view.device.shown_index(context.event):,})",
                                   opts, with_source)
        return lines
    all_ids = stacks.frame_ids(sid)
    visible = stacks.visible_frames(sid, opts.show_native)
    hidden = len(all_ids) - len(visible)
    label_frame = int(stacks.label[sid])
    source_done = not (with_source and opts.show_source)
    for group in collapse_repeats(visible):
        for fid in group.frames:
            style = "native" if frames.native[fid] else "user" if frames.user[fid] else "frame"
            lines.append(_frame_line(frames.name_of(fid), frames.filename_of(fid), int(frames.line[fid]), style))
            lines += _extra_lines(frames, fid)
            if not source_done and (fid == label_frame or int(frames.original[fid]) == label_frame):
                lines += _source_lines(frames.filename_of(label_frame), int(frames.line[label_frame]))
                source_done = True
        if group.repeat > 1:
            what = "frame above repeats" if len(group.frames) == 1 else f"{len(group.frames)} frames above repeat"
            lines.append([(f"    ↻ the {what} ×{group.repeat}", "muted")])
    if hidden:
        lines.append([(f"  ({hidden} C++ frames hidden: c shows them)", "muted")])
    elif opts.show_native and len(visible) and frames.native[all_ids].any() and not frames.native[all_ids].all():
        lines.append([(f"  ({int(frames.native[all_ids].sum())} C++ frames shown: c hides them)", "muted")])
    return lines


def forward_section(view: DeviceView, sid: int) -> list[Line]:
    """The forward traceback torch recorded for a backward allocation (``forward_frames``,
    anomaly mode): where in the forward pass the op ran, innermost line first."""
    if sid < 0:
        return []
    stacks = view.snapshot.stacks
    frames = stacks.frames
    lines: list[Line] = [[], [("forward stack (the op's forward pass, anomaly mode)", "section")]]
    for fid in stacks.frame_ids(sid):
        fid = int(fid)
        style = "user" if frames.user[fid] else "frame"
        lines.append(_frame_line(frames.name_of(fid), frames.filename_of(fid), int(frames.line[fid]), style))
        code = (frames.extra(fid, FORWARD_TEXT) or "").splitlines()[1:]
        lines += [[(f"     {terminal_safe(text.strip())}", "source")] for text in code if text.strip()]
    return lines


def _extra_lines(frames, fid: int) -> list[Line]:
    """What an FX frame adds: its node, and the model code the node came from."""
    if not frames.generated[fid] or frames.extra_offsets[fid + 1] == frames.extra_offsets[fid]:
        return []
    extras = dict(frames.extras(fid))
    lines: list[Line] = []
    node = extras.get(FX_NODE_NAME)
    if node:
        what = " · ".join(terminal_safe(v) for v in (extras.get(FX_NODE_OP), extras.get(FX_NODE_TARGET)) if v)
        lines.append([("     fx node ", "muted"), (terminal_safe(node), "value"),
                      (f"  {what}" if what else "", "muted")])
    trace = extras.get(FX_ORIGINAL_TRACE)
    if trace:
        lines.append([("     from the model's code:", "muted")])
        lines += [[(f"       {terminal_safe(text.rstrip())}", "source")] for text in trace.strip("\n").splitlines()]
    return lines


def _frame_line(name: str, filename: str, line: int, style: str) -> Line:
    """``function  file.py:12  /the/directory``: what identifies the frame comes first."""
    folder, base = os.path.split(filename)
    where = f"{base}:{line}" if line else base
    return [(f"  {name}", style), (f"  {where}", "location")] + ([(f"  {folder}", "muted")] if folder else [])


def _source_lines(filename: str, line: int) -> list[Line]:
    out = []
    for number, text in source_context(filename, line):
        mark = "→" if number == line else " "
        out.append([(f"     {mark}{number:>5} ", "muted"), (text, "source-mark" if number == line else "source")])
    return out
