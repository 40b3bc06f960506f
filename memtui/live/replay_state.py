"""The allocator's segments at any point of a recording, laid out as ``_snapshot()`` lays them out.

A recording holds the segments only as they were at its end. The replay source serves
a recording as if it were running, so at each point it gives the segments the model's
replay (memtui/replay.py) says there were after the last entry revealed: live blocks
with the stacks of their allocations, and the free space between them as ``inactive``
blocks, which is how torch reports a segment.
"""

from __future__ import annotations

import copy

from memtui.live.model import build_live_model
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED
from memtui.replay import Replayer

SMALL_SEGMENT = 2 << 20  # the small pool's segments are 2 MiB


class SegmentsAt:
    def __init__(self, raw: dict) -> None:
        self.raw = raw
        model_input = copy.copy(raw)
        model_input["device_traces"] = [list(t or []) for t in raw.get("device_traces") or []]
        self.snapshot = build_live_model(model_input, "replay")
        self._replayers = {dev.device: Replayer(dev) for dev in self.snapshot.devices}
        self._final = {(int(s.get("device", 0)), int(s.get("address", 0))): s for s in raw.get("segments") or []}

    def at(self, revealed: int) -> list[dict]:
        """The segments of every device after its first ``revealed`` entries."""
        out = []
        traces = self.raw.get("device_traces") or []
        for dev in self.snapshot.devices:
            d = dev.device
            trace = traces[d] if d < len(traces) else []
            state = self._replayers[d].state_at(min(revealed, len(trace)) - 1)
            for s in range(len(state.seg_addr)):
                out.append(self._segment(d, dev, trace, state, s))
        return out

    def _segment(self, d, dev, trace, state, s) -> dict:
        addr, size = int(state.seg_addr[s]), int(state.seg_size[s])
        final = self._final.get((d, addr), {})
        blocks, cursor = [], addr
        allocated = active = requested = 0
        for b in state.segment_blocks(s):
            start, length = int(state.blk_addr[b]), int(state.blk_size[b])
            if start > cursor:
                blocks.append(_free(cursor, start - cursor))
            taken = bool(state.blk_state[b] == ALLOCATED)
            frames, asked = self._origin(dev, trace, state, b, length)
            blocks.append({"address": start, "size": length, "requested_size": asked, "frames": frames,
                           "state": "active_allocated" if taken else "active_pending_free"})
            active += length
            allocated += length if taken else 0
            requested += asked
            cursor = max(cursor, start + length)
        if cursor < addr + size:
            blocks.append(_free(cursor, addr + size - cursor))
        return {"device": d, "address": addr, "total_size": size, "stream": int(state.seg_stream[s]),
                "segment_type": final.get("segment_type", "small" if size <= SMALL_SEGMENT else "large"),
                "segment_pool_id": final.get("segment_pool_id", (0, 0)),
                "is_expandable": bool(state.seg_expandable[s]), "allocated_size": allocated,
                "active_size": active, "requested_size": requested, "frames": [], "blocks": blocks}

    def _origin(self, dev, trace, state, b, length) -> tuple[list, int]:
        """The frames and requested size of a live block: from its alloc entry, else the file's block."""
        life = int(state.blk_life[b])
        if life != NONE:
            event = int(dev.lives.start[life])
            if event != NONE and event < len(trace):
                entry = trace[event]
                return list(entry.get("frames") or []), int(entry.get("size") or length)
        return [], length


def _free(address: int, size: int) -> dict:
    return {"address": address, "size": size, "requested_size": 0, "state": "inactive", "frames": []}
