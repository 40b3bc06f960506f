"""What the map saw come and go between two reads of the segments, as trace-shaped entries.

A job reads its trace seldom (its cost grows with the recorded history) and its segments
often (their cost does not). Between trace reads the event log would stand still while the
map moves; so the watcher turns the difference between the segments of the last trace read
and the segments now into entries the log can show at once: a block that became active is
an ``alloc``, one that stopped being active a ``free_completed``, a segment that came or went
a ``segment_alloc`` or ``segment_free`` (an expandable segment's range that grew or shrank, a
``segment_map`` or ``segment_unmap`` at its end), each with the stack the block carries and
the time of the read that first saw it. Taken against the last trace read, they always
lead from the recorded state to the segments now, and are never more than the blocks there
are. They are observations, not the record: a block allocated and freed between two reads
never shows, and the time is the read's, not the allocation's. Each says so in its
``user_metadata`` (the log shows it), and the next trace read replaces them all with what
torch recorded.
"""

from __future__ import annotations

SEEN_NOTE = "seen in the segments: the recorded entry replaces this at the next trace read"


def _active(segments: list[dict]) -> tuple[dict, dict, dict]:
    """(plain segments by (device, address, size), expandable ones by (device, address),
    active blocks by (device, address, size))."""
    segs: dict[tuple, dict] = {}
    expandable: dict[tuple, dict] = {}
    blocks: dict[tuple, tuple[dict, dict]] = {}
    for seg in segments:
        device = seg.get("device", 0)
        if seg.get("is_expandable"):
            # torch reports an expandable segment's mapped range, which grows and shrinks at
            # its end: a change of size is a map or an unmap there, not a new segment.
            expandable[(device, seg.get("address"))] = seg
        else:
            segs[(device, seg.get("address"), seg.get("total_size"))] = seg
        for block in seg.get("blocks") or []:
            if str(block.get("state", "")).startswith("active"):
                blocks[(device, block.get("address"), block.get("size"))] = (block, seg)
    return segs, expandable, blocks


def _entry(action: str, addr, size, seg: dict, time_us: int, frames) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": seg.get("stream", 0), "time_us": time_us,
            "frames": list(frames or []), "compile_context": "N/A", "user_metadata": SEEN_NOTE}


def seen_entries(before: list[dict], after: list[dict], t: float) -> dict[int, list[dict]]:
    """Entries per device for what changed from ``before`` to ``after`` (segments as
    ``_snapshot()`` lays them out), timed ``t`` (seconds since the epoch): frees first, then
    the segments released, the segments mapped, and the allocations, as torch orders them."""
    time_us = int(t * 1e6)
    segs_before, exp_before, blocks_before = _active(before)
    segs_after, exp_after, blocks_after = _active(after)
    out: dict[int, list[dict]] = {}

    def add(device, entry: dict) -> None:
        out.setdefault(int(device or 0), []).append(entry)

    for key, (block, seg) in blocks_before.items():
        if key not in blocks_after:
            add(key[0], _entry("free_completed", key[1], key[2], seg, time_us, block.get("frames")))
    for key, seg in segs_before.items():
        if key not in segs_after:
            add(key[0], _entry("segment_free", key[1], key[2], seg, time_us, seg.get("frames")))
    for key, seg in exp_before.items():  # unmapped at the end of the range
        size = int(seg.get("total_size") or 0)
        left = int(exp_after[key].get("total_size") or 0) if key in exp_after else 0
        if left < size:
            add(key[0], _entry("segment_unmap", int(key[1] or 0) + left, size - left, seg, time_us, None))
    for key, seg in exp_after.items():  # mapped at the end of the range
        size = int(seg.get("total_size") or 0)
        had = int(exp_before[key].get("total_size") or 0) if key in exp_before else 0
        if size > had:
            add(key[0], _entry("segment_map", int(key[1] or 0) + had, size - had, seg, time_us, None))
    for key, seg in segs_after.items():
        if key not in segs_before:
            add(key[0], _entry("segment_alloc", key[1], key[2], seg, time_us, seg.get("frames")))
    for key, (block, seg) in blocks_after.items():
        if key not in blocks_before:
            add(key[0], _entry("alloc", key[1], key[2], seg, time_us, block.get("frames")))
    return out
