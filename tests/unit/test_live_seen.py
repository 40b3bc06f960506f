"""The event log between trace reads: what the segments showed come and go."""

from __future__ import annotations

import copy
import os

from memtui.live import protocol as p
from memtui.live import wire
from memtui.live.model import build_live_model
from memtui.live.seen import SEEN_NOTE, seen_entries
from memtui.live.state import LiveState
from memtui.load import read_snapshot
from memtui.model import actions as act

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "sample_snapshots", "train_linear_adam.pickle.xz")


def _active(segments):
    return [(s, b) for s in segments for b in s["blocks"] if b["state"].startswith("active")]


def test_blocks_and_segments_that_came_and_went_become_entries_in_torch_s_order():
    before = read_snapshot(SAMPLE)["segments"]
    after = copy.deepcopy(before)
    seg, block = _active(after)[0]
    block["state"] = "inactive"
    new_seg = {"device": 0, "address": 1 << 40, "total_size": 2 << 20, "stream": 0,
               "blocks": [{"address": 1 << 40, "size": 2 << 20, "state": "active_allocated",
                           "frames": [{"filename": "x.py", "line": 3, "name": "f"}]}]}
    after.append(new_seg)
    entries = seen_entries(before, after, 1800000000.5)[0]
    assert [(e["action"], e["addr"], e["size"]) for e in entries] == [
        ("free_completed", block["address"], block["size"]),
        ("segment_alloc", 1 << 40, 2 << 20),
        ("alloc", 1 << 40, 2 << 20)]
    assert {e["time_us"] for e in entries} == {1800000000500000}
    assert entries[-1]["frames"] == new_seg["blocks"][0]["frames"]
    assert all(e["user_metadata"] == SEEN_NOTE for e in entries)
    assert seen_entries(before, copy.deepcopy(before), 0.0) == {}


def _delta(segments, table, t, traces=None):
    table.new_read()
    packed = wire.pack_segments(segments, table)
    packed_traces = {d: wire.pack_entries(e, table) for d, e in (traces or {}).items()}
    first, frames = table.new_frames()
    return {"kind": p.DELTA, "t": t, "frames_from": first, "frames": frames, "segments": packed,
            "traces": packed_traces, "annotations": [], "gap": False}


def test_the_view_shows_what_the_map_saw_until_the_trace_brings_the_record():
    raw = read_snapshot(SAMPLE)
    table = wire.FrameTable()
    state = LiveState()
    packed = wire.pack_snapshot(raw, table)
    state.apply({"kind": p.STATE, "t": 1.0, "snapshot": packed, "frames": table.new_frames()[1]})
    recorded = len(state.traces[0])
    last_time = raw["device_traces"][0][-1]["time_us"] / 1e6

    freed = copy.deepcopy(raw["segments"])
    seg, block = _active(freed)[-1]
    block["state"] = "inactive"
    state.apply(_delta(freed, table, last_time + 0.3))
    assert state.seen_count() == 1 and state.events() == recorded

    view = state.raw_snapshot(with_seen=True)
    assert view["device_traces"][0][-1]["action"] == "free_completed"
    assert len(state.raw_snapshot()["device_traces"][0]) == recorded  # what is saved: the record only
    model = build_live_model(view, "live")
    trace = model.devices[0].trace
    assert int(trace.action[-1]) == act.FREE_COMPLETED and int(trace.addr[-1]) == block["address"]

    record = {"action": "free_completed", "addr": block["address"], "size": block["size"], "stream": 0,
              "time_us": int((last_time + 0.2) * 1e6), "frames": [], "compile_context": "N/A", "user_metadata": ""}
    state.apply(_delta(freed, table, last_time + 0.6, traces={0: [record]}))
    assert state.seen_count() == 0 and state.events() == recorded + 1


def test_an_oom_is_said_the_moment_its_message_comes():
    from memtui.live.views import oom_headline

    line = oom_headline({"kind": "oom", "device": 0, "requested": 2 << 30, "device_allocated": 3 << 30,
                         "device_free": 64 << 20})
    assert line.startswith("OUT OF MEMORY on device 0: 2.00 GiB requested, 3.00 GiB allocated, 64.00 MiB free")
    assert oom_headline({"kind": "oom"}).startswith("OUT OF MEMORY on device ?")
    capped = oom_headline({"kind": "oom", "device": 0, "requested": 8 << 30, "device_free": 138 << 30}, 4 << 30)
    assert "8.00 GiB requested, a limit of 4.00 GiB, 138.00 GiB free on the device" in capped
