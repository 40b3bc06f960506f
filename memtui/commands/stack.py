"""memtui stack: the allocation and free stacks of one address_n."""

from __future__ import annotations

from memtui.commands._common import add_json_flag, add_snapshot_argument, load, print_json
from memtui.errors import UsageError
from memtui.model import Match, Snapshot
from memtui.model.lifetimes import NONE
from memtui.units import format_bytes

NAME = "stack"
HELP = "Show the full stack of one allocation (alloc and free), by address_n."


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("address_n", help="allocation id such as 7f064c000000_0 (0x and b/s prefixes accepted)")
    parser.add_argument("--all-frames", action="store_true", help="include C++/allocator-internal frames")
    add_json_flag(parser)


def describe_match(snapshot: Snapshot, match: Match, all_frames: bool) -> dict:
    """Everything about one allocation: its events and their stacks."""
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
                events[label] = {"index": i, "stack": _frames(snapshot, int(dev.trace.stack[i]), all_frames),
                                 "action": snapshot.actions.name(int(dev.trace.action[i]))}
        size = int(lives.size[match.life])
    else:
        size = int(dev.blocks.size[match.block])
    result = {"device": match.device, "address_n": match.address_n, "size": size, "events": events}
    if match.block != NONE:
        result["block"] = {
            "state": dev.blocks.state_names[int(dev.blocks.state[match.block])],
            "stack": _frames(snapshot, int(dev.blocks.stack[match.block]), all_frames),
        }
    result["alloc_in_trace"] = "alloc" in events or "segment_alloc" in events
    return result


def _frames(snapshot: Snapshot, sid: int, all_frames: bool) -> list[dict]:
    if sid < 0:
        return []
    return [snapshot.stacks.frame_dict(f) for f in snapshot.stacks.visible_frames(sid, all_frames)]


def run(args) -> int:
    snapshot = load(args.snapshot)
    matches = snapshot.find(args.address_n)
    if not matches:
        raise UsageError(f"{args.address_n}: no such allocation in {snapshot.name}")
    # An address_n names one life; the same life may also be a block at snapshot time.
    match = next((m for m in matches if m.life != NONE), matches[0])
    if match.block == NONE:
        match.block = next((m.block for m in matches if m.block != NONE and m.address_n == match.address_n), NONE)
    info = describe_match(snapshot, match, args.all_frames)
    if args.json:
        print_json(info)
        return 0
    print(f"{info['address_n']}  {format_bytes(info['size'])}  device {info['device']}")
    if not info["alloc_in_trace"]:
        print("(allocated before the trace starts: its alloc fell off the ring buffer or predates recording)")
    for label, event in info["events"].items():
        print(f"\n{label} at event {event['index']:,}:")
        _print_stack(event["stack"])
    if "block" in info:
        print(f"\nat snapshot time: {info['block']['state']}")
        if not info["events"]:
            _print_stack(info["block"]["stack"])
    return 0


def _print_stack(frames: list[dict]) -> None:
    if not frames:
        print("  (no stack recorded)")
    for f in frames:
        print(f"  {f['filename']}:{f['line']} {f['name']}")
