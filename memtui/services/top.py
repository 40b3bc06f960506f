"""top: the largest live blocks at snapshot time and where they were allocated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.analysis.attribution import attribute, block_starts
from memtui.analysis.callsites import CallSites
from memtui.model import DeviceModel, Snapshot
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.report.sections import Lines, Report
from memtui.services.options import option
from memtui.units import format_bytes

# The block states of a snapshot as the text table says them (--json keeps the snapshot's names).
STATE_TEXT = {"active_allocated": "allocated", "active_pending_free": "pending free",
              "active_awaiting_free": "pending free"}


@dataclass(frozen=True)
class TopOptions:
    device: int | None = option(None, "only this device (default: all)", optional=True)
    # The MCP tool pages with limit and offset instead.
    n: int = option(20, "how many blocks (default 20)", low=0, flag="-n", front_ends=("cli",))


@dataclass
class TopResult:
    rows: list[dict[str, Any]]  # the largest n, largest first
    total: int  # live blocks in all (on the device asked for)

    def to_json(self) -> list[dict[str, Any]]:
        return self.rows

    def report(self) -> Report:
        if not self.rows:
            return Report("Top", [Lines("rows", lines=["no live blocks at snapshot time"])])
        lines = [f"{'size':>12}  {'address_n':<18} {'dev':>3}  {'state':<12} allocated at"]
        for row in self.rows:
            state = STATE_TEXT.get(row["state"], row["state"])
            where = row["top_frame"] or row["attributed_to"] or (
                "(ghost block: allocated before the trace)" if row["ghost"] else "(no stack)")
            lines.append(f"{format_bytes(row['size']):>12}  {row['address_n']:<18} {row['device']:>3}  {state:<12} "
                         f"{where}")
        return Report("Top", [Lines("rows", lines=lines)])


def top(snapshot: Snapshot, options: TopOptions) -> TopResult:
    if options.device is not None:
        snapshot.device_or_default(options.device)  # one line for a device the file does not have
    total = sum(int(np.count_nonzero(_live(d))) for d in snapshot.devices
                if options.device is None or d.device == options.device)
    return TopResult(largest_live_blocks(snapshot, options.n, options.device), total)


def _live(dev: DeviceModel) -> np.ndarray:
    live: np.ndarray = (dev.blocks.state == ALLOCATED) | (dev.blocks.state == PENDING_FREE)
    return live


def largest_live_blocks(snapshot: Snapshot, n: int, device: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for dev in snapshot.devices:
        if device is not None and dev.device != device:
            continue
        for k in np.nonzero(_live(dev))[0]:
            rows.append((int(dev.blocks.size[k]), dev, int(k)))
    rows.sort(key=lambda r: -r[0])
    rows = rows[: max(n, 0)]
    attributed = _attributed_to(snapshot, rows)
    out = []
    for size, dev, b in rows:
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
            # a block without a stack made on the autograd thread: under which backward() line
            "attributed_to": attributed.get((dev.device, b)),
        })
    return out


def _attributed_to(snapshot: Snapshot, rows: list[tuple[int, DeviceModel, int]]) -> dict[tuple[int, int], str]:
    """The site of each listed block that has no stack but a life in the trace, where the
    trace tells one (memtui/analysis/attribution.py), by (device, block)."""
    out: dict[tuple[int, int], str] = {}
    stackless = [(dev, b) for _, dev, b in rows if dev.block_site_stack[b] < 0 and dev.block_life[b] != NONE]
    if not stackless:
        return out
    sites = CallSites(snapshot.stacks)
    for dev in {id(d): d for d, _ in stackless}.values():
        blocks = np.array([b for d, b in stackless if d is dev], np.int64)
        found = attribute(snapshot, dev, sites, np.full(len(blocks), -1), block_starts(dev, dev.block_life[blocks]))
        for b, site in zip(blocks.tolist(), found.of_item.tolist()):
            if site >= len(sites):
                out[(dev.device, b)] = found.label(site)
    return out
