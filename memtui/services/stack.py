"""stack: the allocation and free stacks of one address_n.

A bare address (no ``_N``) names every allocation made at it, as the explorer's ``/``
does: with several, they are listed (address_n, event indices, size, top frame) for the
user to pick one; with exactly one, its stacks are shown as for its address_n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.errors import UsageError
from memtui.model import Match, Snapshot, metadata
from memtui.model import actions as act
from memtui.model.address_n import parse_address
from memtui.model.lifetimes import NONE
from memtui.model.relevance import FORWARD_TEXT
from memtui.model.segments import pool_name
from memtui.model.snapshot import ALLOC_BEFORE_TRACE
from memtui.model.stackless import stackless_context
from memtui.report.sections import Lines, Report
from memtui.services.options import option
from memtui.units import format_bytes

FORMS = "e.g. 7f064c000000_0, 0x7f064c000000_0, b'7f064c000000_0, s'7f064c000000_0 or a bare 7f064c000000"


def _check_address(text: str) -> None:
    if parse_address(text) is None:  # before the file is read
        raise UsageError(f"{text}: not an address_n or address ({FORMS})")


@dataclass(frozen=True)
class StackOptions:
    address_n: str = option("", "the allocation: address_n such as 7f064c000000_0 (0x, b/s and memory_viz's b'/s' "
                                "prefixes accepted), or a bare address (7f064c000000) to list every allocation "
                                "made at it", kind="str", positional=True, check=_check_address)
    all_frames: bool = option(False, "include C++ and allocator-internal frames", kind="bool")


@dataclass
class StackResult:
    query: str
    found: dict[str, Any] | list[dict[str, Any]]  # one allocation (describe_match), or a row per allocation (life_row)

    @property
    def listing(self) -> bool:
        return isinstance(self.found, list)

    def to_json(self) -> dict[str, Any] | list[dict[str, Any]]:
        return self.found

    def report(self) -> Report:
        lines = listing_lines(self.found, self.query.strip()) if isinstance(self.found, list) else \
            allocation_lines(self.found)
        return Report("Stack", [Lines("stack", lines=lines)])


def stack(snapshot: Snapshot, options: StackOptions) -> StackResult:
    return StackResult(options.address_n, allocation_json(snapshot, options.address_n, options.all_frames))


def describe_match(snapshot: Snapshot, match: Match, all_frames: bool) -> dict[str, Any]:
    """Everything about one allocation: its events and their stacks (a backward allocation's
    forward stack too), the labels ``annotate`` entries gave it, its pool, and whether it is
    a ghost block (live in the snapshot, allocated before the trace)."""
    dev = snapshot.devices[match.device]
    lives = dev.lives if match.kind == "block" else dev.segment_lives
    events = {}
    if match.life != NONE:
        names = [("alloc", lives.start), ("free_requested", lives.request), ("free_completed", lives.end)]
        if match.kind == "segment":
            names = [("segment_alloc", lives.start), ("segment_free", lives.end)]
        for label, column in names:
            i = int(column[match.life])
            if i != NONE:
                action = int(dev.trace.action[i])
                if action == act.FREE_REQUESTED:
                    label = "free_requested"  # the end of a trace recorded without free_completed
                events[label] = {"index": dev.shown_index(i),
                                 "stack": _frames(snapshot, int(dev.trace.stack[i]), all_frames),
                                 "action": snapshot.actions.name(action)}
                context = stackless_context(snapshot, match.device, i)
                if context is not None:
                    events[label]["no_stack"] = context.note
                if int(dev.trace.fwd[i]) >= 0:
                    events[label]["forward_stack"] = _frames(snapshot, int(dev.trace.fwd[i]), True)
                meta = int(dev.trace.meta[i])
                if snapshot.strings[meta]:
                    events[label]["user_metadata"] = metadata.display(snapshot.strings[meta])
        size = int(lives.size[match.life])
    else:
        size = int(dev.blocks.size[match.block])
    result = {"device": match.device, "address_n": match.address_n, "size": size, "events": events}
    if match.block != NONE:
        block: dict[str, Any] = {
            "state": dev.blocks.state_names[int(dev.blocks.state[match.block])],
            "stack": _frames(snapshot, int(dev.blocks.stack[match.block]), all_frames),
            "ghost": bool(dev.ghost_blocks[match.block]),
        }
        if int(dev.blocks.fwd[match.block]) >= 0:
            block["forward_stack"] = _frames(snapshot, int(dev.blocks.fwd[match.block]), True)
        result["block"] = block
        segs = dev.segments
        result["pool"] = pool_name(segs.pools[int(segs.pool[int(dev.blocks.segment[match.block])])])
    if match.kind == "block":
        notes = dev.annotations
        found: Any = notes.of_life(match.life) if match.life != NONE else \
            notes.of_block(match.block) if match.block != NONE else []
        result["annotations"] = [_annotation(snapshot, match.device, int(j), all_frames) for j in found]
    result["alloc_in_trace"] = "alloc" in events or "segment_alloc" in events
    if not result["alloc_in_trace"]:
        result["alloc_missing"] = dev.alloc_not_in_trace()
    return result


def _annotation(snapshot: Snapshot, device: int, j: int, all_frames: bool) -> dict[str, Any]:
    dev = snapshot.devices[device]
    sid = int(dev.trace.meta[j])
    value = snapshot.strings.raw(sid)
    return {"index": dev.shown_index(j), "label": metadata.display(snapshot.strings[sid]),
            "user_metadata": metadata.fields(value) if sid in snapshot.strings.dict_ids else value,
            "stack": _frames(snapshot, int(dev.trace.stack[j]), all_frames)}


def _frames(snapshot: Snapshot, sid: int, all_frames: bool) -> list[dict[str, Any]]:
    if sid < 0:
        return []
    return [snapshot.stacks.frame_dict(f) for f in snapshot.stacks.visible_frames(sid, all_frames)]


def life_row(snapshot: Snapshot, match: Match) -> dict[str, Any]:
    """One allocation in brief: its address_n, event indices, size and top frame."""
    dev = snapshot.devices[match.device]
    segment = match.kind == "segment"
    lives = dev.segment_lives if segment else dev.lives
    columns = ([("segment_alloc", lives.start), ("segment_free", lives.end)] if segment else
               [("alloc", lives.start), ("free_requested", lives.request), ("free_completed", lives.end)])
    row: dict[str, Any] = {"device": match.device, "address_n": match.address_n}
    rows = [int(column[match.life]) if match.life != NONE else NONE for _, column in columns]
    for (label, _), i in zip(columns, rows):
        row[label] = dev.shown_index(i) if i != NONE else None  # the source's numbers, as every view gives them
    if match.life != NONE:
        row["size"] = int(lives.size[match.life])
    else:
        row["size"] = int(dev.blocks.size[match.block])
    start = rows[0] if rows[0] != NONE else None
    if start is not None:
        row["top_frame"] = snapshot.event_top_frame(match.device, start)
    elif match.block != NONE:
        row["top_frame"] = snapshot.stacks.top_frame_text(int(dev.block_site_stack[match.block]))
    else:
        row["top_frame"] = ""
    row["state"] = dev.blocks.state_names[int(dev.blocks.state[match.block])] if match.block != NONE else None
    return row


def _allocations(matches: list[Match]) -> list[Match]:
    """One match per address_n, in the model's order, each with the block (if any) it
    still is at snapshot time."""
    by_name: dict[tuple[str, str], Match] = {}
    for m in matches:
        key = (m.kind, m.address_n)
        kept = by_name.setdefault(key, m)
        if kept is not m:
            if kept.life == NONE and m.life != NONE:
                m, kept = kept, m
                by_name[key] = kept
            if kept.block == NONE and m.block != NONE:
                kept.block = m.block
    return list(by_name.values())


def allocation_json(snapshot: Snapshot, text: str, all_frames: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
    """What ``stack --json`` prints for ``text``: one allocation's stacks (a dict, see
    :func:`describe_match`), or for a bare address made several allocations, a row per
    allocation (a list, see :func:`life_row`). UsageError when ``text`` names none."""
    address = parse_address(text)
    if address is None:
        raise UsageError(f"{text}: not an address_n or address ({FORMS})")
    matches = snapshot.find(text)
    if not matches:
        raise UsageError(f"{text}: no such allocation in {snapshot.name}")
    if not address.versioned:
        allocations = _allocations(matches)
        if len(allocations) > 1:
            return [life_row(snapshot, m) for m in allocations]
    # An address_n names one life; the same life may also be a block at snapshot time.
    match = next((m for m in matches if m.life != NONE), matches[0])
    if match.block == NONE:
        match.block = next((m.block for m in matches if m.block != NONE and m.address_n == match.address_n), NONE)
    return describe_match(snapshot, match, all_frames)


def allocation_lines(info: dict[str, Any]) -> list[str]:
    """One allocation's stacks as ``memtui stack`` prints them."""
    out: list[str] = []
    pool = f"  {info['pool']}" if "pool" in info else ""
    out.append(f"{info['address_n']}  {format_bytes(info['size'])}  device {info['device']}{pool}")
    if info.get("block", {}).get("ghost"):
        out.append("(ghost block: live in the snapshot's segment list, but no event of the trace is its allocation: "
                   "allocated before recording began, or its alloc fell off the ring buffer)")
    elif not info["alloc_in_trace"]:
        why = info["alloc_missing"]
        out.append(f"({why}: its alloc fell off the ring buffer or predates recording)" if why == ALLOC_BEFORE_TRACE
                   else f"({why})")
    for label, event in info["events"].items():
        meta = f"  [{event['user_metadata']}]" if event.get("user_metadata") else ""
        out += ["", f"{label} at event {event['index']:,}:{meta}"]
        out += stack_lines(event["stack"], event.get("no_stack", ""))
        if "forward_stack" in event:
            out.append("  forward stack (the op's forward pass):")
            out += stack_lines(event["forward_stack"], indent="    ")
    if "block" in info:
        out += ["", f"at snapshot time: {info['block']['state']}"]
        if not info["events"]:
            out += stack_lines(info["block"]["stack"], "no stack: the trace never saw this allocation"
                               if info["block"]["ghost"] else "")
            if "forward_stack" in info["block"]:
                out.append("  forward stack (the op's forward pass):")
                out += stack_lines(info["block"]["forward_stack"], indent="    ")
    for note in info.get("annotations", []):
        out += ["", f"annotation at event {note['index']:,}: {note['label']}"]
        out += stack_lines(note["stack"])
    return out


def listing_lines(rows: list[dict[str, Any]], query: str) -> list[str]:
    """Every allocation made at a bare address, one line each."""
    segment = "segment_alloc" in rows[0]
    what = "segment allocations" if segment else "allocations"
    out = [f"{len(rows):,} {what} at {query} on device {rows[0]['device']}; name one by its address_n for its stacks"]
    labels = ["segment_alloc", "segment_free"] if segment else ["alloc", "free_requested", "free_completed"]
    width = max(len(r["address_n"]) for r in rows)
    header = "".join(f"{label:>16}" for label in labels)
    out += ["", f"{'address_n':<{width}}{header} {'size':>11}  frame"]
    for r in rows:
        indices = "".join(f"{_index(r[label]):>16}" for label in labels)
        state = f"  [{r['state']} at snapshot]" if r["state"] else ""
        out.append(f"{r['address_n']:<{width}}{indices} {format_bytes(r['size']):>11}  {r['top_frame']}{state}")
    return out


def _index(i: int | None) -> str:
    return "-" if i is None else f"{i:,}"


def stack_lines(frames: list[dict[str, Any]], no_stack: str = "", indent: str = "  ") -> list[str]:
    out = []
    if not frames:
        out.append(f"{indent}({no_stack or 'no stack recorded'})")
    for f in frames:
        out.append(f"{indent}{f['filename']}:{f['line']} {f['name']}")
        if f.get("fx_node_name"):
            what = " ".join(str(f[k]) for k in ("fx_node_op", "fx_node_target") if f.get(k))
            out.append(f"{indent}    fx node {f['fx_node_name']} {what}".rstrip())
        for line in (f.get("fx_original_trace") or "").strip("\n").splitlines():
            out.append(f"{indent}    | {line.rstrip()}")
        code = (f.get(FORWARD_TEXT) or "").splitlines()[1:]
        for line in code:
            if line.strip():
                out.append(f"{indent}    {line.strip()}")
    return out
