"""memtui top: the largest live blocks and where they were allocated."""

from __future__ import annotations

import numpy as np

from memtui.commands._common import add_json_flag, add_snapshot_argument, load, print_json
from memtui.model import Snapshot
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.units import format_bytes

# The block states of a snapshot as the text table says them (--json keeps the snapshot's names).
STATE_TEXT = {"active_allocated": "allocated", "active_pending_free": "pending free",
              "active_awaiting_free": "pending free"}

NAME = "top"
HELP = "List the largest live blocks at snapshot time with their address_n and allocating call site."


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("-n", type=int, default=20, help="how many blocks (default 20)")
    parser.add_argument("--device", type=int, default=None, help="only this device")
    add_json_flag(parser)


def largest_live_blocks(snapshot: Snapshot, n: int, device: int | None = None) -> list[dict]:
    rows = []
    for dev in snapshot.devices:
        if device is not None and dev.device != device:
            continue
        blocks = dev.blocks
        live = np.nonzero((blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE))[0]
        for b in live:
            rows.append((int(blocks.size[b]), dev, int(b)))
    rows.sort(key=lambda r: -r[0])
    out = []
    for size, dev, b in rows[: max(n, 0)]:
        sid = int(dev.block_site_stack[b])  # a block allocated in backward: its forward line (relevance.py)
        fid = int(snapshot.stacks.label[sid]) if sid >= 0 else -1
        out.append({
            "device": dev.device,
            "address_n": dev.block_address_n(b),
            "address": int(dev.blocks.address[b]),
            "size": size,
            "requested_size": int(dev.blocks.requested_size[b]),
            "state": dev.blocks.state_names[int(dev.blocks.state[b])],
            "frame": snapshot.stacks.frame_dict(fid) if fid >= 0 else None,
            "top_frame": snapshot.stacks.frames.label_text(fid) if fid >= 0 else "",
            "ghost": bool(dev.ghost_blocks[b]),
        })
    return out


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    rows = largest_live_blocks(snapshot, args.n, args.device)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no live blocks at snapshot time")
        return 0
    print(f"{'size':>12}  {'address_n':<18} {'dev':>3}  {'state':<12} allocated at")
    for row in rows:
        state = STATE_TEXT.get(row["state"], row["state"])
        print(f"{format_bytes(row['size']):>12}  {row['address_n']:<18} {row['device']:>3}  {state:<12} "
              f"{row['top_frame'] or ('(ghost block: allocated before the trace)' if row['ghost'] else '(no stack)')}")
    return 0
