"""info: what is in a snapshot, per device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.jsonvalue import json_value
from memtui.model import DeviceModel, Snapshot
from memtui.model.segments import BLOCK_STATES, pool_name
from memtui.report.sections import Lines, Report
from memtui.units import format_bytes


@dataclass(frozen=True)
class InfoOptions:
    """info asks nothing but the file."""


@dataclass
class InfoResult:
    """``info``'s answer: the figures of each device, with the snapshot they describe."""

    snapshot: Snapshot
    summary: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.summary

    def report(self) -> Report:
        return Report("Info", [Lines("summary", lines=render_lines(self.snapshot, self.summary))])


def info(snapshot: Snapshot, options: InfoOptions) -> InfoResult:
    return InfoResult(snapshot, summarize(snapshot))


def render_text(snapshot: Snapshot, summary: dict[str, Any]) -> str:
    """The summary as ``memtui info`` prints it."""
    return "\n".join(render_lines(snapshot, summary))


def _pools(dev: DeviceModel) -> list[dict[str, Any]]:
    """Each memory pool of the device's segments: torch's id, its name, segments, bytes."""
    segs = dev.segments
    out = []
    for k, pool in enumerate(segs.pools):
        mine = segs.pool == k
        if not mine.any():
            continue
        out.append({"id": list(pool), "name": pool_name(pool), "segments": int(mine.sum()),
                    "reserved": int(segs.total_size[mine].sum())})
    return out


def summarize(snapshot: Snapshot) -> dict[str, Any]:
    """The documented ``info --json`` object."""
    devices = []
    overflowed = snapshot.trace_overflowed
    for dev in snapshot.present_devices:
        trace = dev.trace
        states = {name: 0 for name in BLOCK_STATES}
        states.update(dev.blocks.state_counts())
        first_time, last_time = dev.time_span or (None, None)
        ooms = [
            {"index": dev.shown_index(int(i)), "size": int(trace.size[i]), "device_free": int(trace.device_free[i])}
            for i in dev.oom_indices()
        ]
        devices.append({
            "device": dev.device,
            "segments": len(dev.segments),
            "blocks": len(dev.blocks),
            "reserved": dev.reserved,
            "allocated": dev.allocated,
            "active": dev.active,
            "block_states": states,
            "ghost_blocks": int(dev.ghost_blocks.sum()),
            "pools": _pools(dev),
            "trace": {
                "overflowed": overflowed,
                "max_entries": snapshot.trace_max_entries,
                "forward_frames": dev.forward_frames,
                "entries": len(trace),
                "actions": dev.action_counts(snapshot.actions.names),
                "ooms": ooms,
                "first_time_us": first_time,
                "last_time_us": last_time,
                "allocations": int(len(dev.lives)),
                "live_at_end": dev.live_at_end,
            },
        })
    return {
        "file": snapshot.source_path,
        "file_size": snapshot.source_size,
        "devices": devices,
        "allocator_settings": json_value(snapshot.allocator_settings),
        "annotations": len(snapshot.annotations),
        "warnings": list(snapshot.warnings) + ([overflow_warning(snapshot)] if overflowed else []),
        "export_header": json_value(snapshot.header) if snapshot.header else None,
    }


def overflow_warning(snapshot: Snapshot) -> str:
    size = snapshot.trace_max_entries
    ring = f"its {size:,}-entry ring buffer" if size else "its ring buffer"
    return (f"the trace starts mid-run: {ring} overflowed (trace_alloc_overflowed), so older events were "
            "dropped; blocks allocated before it are shown from the snapshot's segment list")


def render_lines(snapshot: Snapshot, summary: dict[str, Any]) -> list[str]:
    lines = [f"{snapshot.name}  ({format_bytes(snapshot.source_size)})"]
    if snapshot.header:
        header = snapshot.header
        what = f"filter {header['filter']!r}" if header.get("filter") else "no filter"
        if header.get("selection"):
            what += f", selection {header['selection']}"
        lines.append(f"memtui export of {header.get('source_name', '?')} ({what})")
    for dev in summary["devices"]:
        trace = dev["trace"]
        lines.append("")
        lines.append(f"device {dev['device']}")
        lines.append(f"  segments {dev['segments']:,}   blocks {dev['blocks']:,}")
        lines.append(f"  reserved {format_bytes(dev['reserved'])}   allocated {format_bytes(dev['allocated'])}"
                     f"   active {format_bytes(dev['active'])}")
        states = ", ".join(f"{k} {v:,}" for k, v in dev["block_states"].items() if v) or "none"
        lines.append(f"  block states: {states}" + (f"   ghost blocks {dev['ghost_blocks']:,}" if dev["ghost_blocks"]
                                                      else ""))
        if len(dev["pools"]) > 1 or any(p["id"] != [0, 0] for p in dev["pools"]):
            lines.append("  pools: " + ", ".join(f"{p['name']} ({p['segments']:,} seg, {format_bytes(p['reserved'])})"
                                                 for p in dev["pools"]))
        span = ""
        if trace["first_time_us"] is not None and trace["last_time_us"] is not None:
            span = f" over {(trace['last_time_us'] - trace['first_time_us']) / 1e6:.3f}s"
        lines.append(f"  trace: {trace['entries']:,} entries{span}"
                     + ("  (overflowed: starts mid-run)" if trace["overflowed"] else ""))
        if trace["actions"]:
            lines.append("    " + ", ".join(f"{k} {v:,}" for k, v in trace["actions"].items()))
        if trace["forward_frames"]:
            lines.append(f"    {trace['forward_frames']:,} entries with forward_frames (backward ops, anomaly mode)")
        for oom in trace["ooms"]:
            lines.append(f"  OOM at event {oom['index']:,}: requested {format_bytes(oom['size'])},"
                         f" device free {format_bytes(oom['device_free'])}")
    settings = summary["allocator_settings"]
    if settings:
        # The variable's name as the allocator wrote it (PYTORCH_CUDA_ALLOC_CONF, or another backend's).
        key = next((k for k in settings if isinstance(k, str) and k.endswith("ALLOC_CONF")), "PYTORCH_CUDA_ALLOC_CONF")
        conf = settings.get(key) or "(default)"
        lines.append("")
        lines.append(f"allocator: {key}={conf}  expandable_segments="
                     f"{settings.get('expandable_segments')}  max_split_size={settings.get('max_split_size')}")
    lines.append(f"annotations: {summary['annotations']:,}")
    for warning in summary["warnings"]:
        lines.append(f"warning: {warning}")
    return lines
