"""The event log between trace reads: what the segments showed come and go."""

from __future__ import annotations

import copy
import os

from memtui.live import protocol as p
from memtui.live import wire
from memtui.live.model import build_live_model
from memtui.live.seen import SEEN_NOTE, seen_entries
from memtui.live.state import LiveState
from memtui.load.read import read_snapshot
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


def _state_of(raw):
    table = wire.FrameTable()
    state = LiveState()
    packed = wire.pack_snapshot(raw, table)
    state.apply({"kind": p.STATE, "t": 1.0, "snapshot": packed, "frames": table.new_frames()[1]})
    return state, table


def _allocated(segments) -> int:
    return sum(b["size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated")


def test_blocks_toggled_over_many_reads_leave_the_view_as_the_segments_say():
    raw = read_snapshot(SAMPLE)
    state, table = _state_of(raw)
    t = raw["device_traces"][0][-1]["time_us"] / 1e6
    segments = copy.deepcopy(raw["segments"])
    toggled = _active(segments)[:6]
    for read in range(40):  # blocks freed and allocated again, read after read
        for k, (_, block) in enumerate(toggled):
            block["state"] = "inactive" if (read + k) % 3 else "active_allocated"
        state.apply(_delta(copy.deepcopy(segments), table, t + 0.1 * (read + 1)))
        assert state.seen_count() <= 2 * len(toggled)  # never more than the blocks that differ
    view = state.raw_snapshot(with_seen=True)
    model = build_live_model(view, "live")
    dev = model.devices[0]
    from memtui.analysis.live import allocated_curve
    assert int(allocated_curve(dev)[-1]) == _allocated(segments)
    times = [e["time_us"] for e in view["device_traces"][0]]
    assert times == sorted(times)
    # what is saved is the record: the trace with the segments of the same read
    assert state.raw_snapshot()["segments"] == state.traced_segments


def test_an_expandable_segment_that_grows_is_a_map_at_its_end_not_a_second_segment():
    raw = read_snapshot(os.path.join(os.path.dirname(SAMPLE), "expandable_segments.pickle.xz"))
    state, table = _state_of(raw)
    t = raw["device_traces"][0][-1]["time_us"] / 1e6
    grown = copy.deepcopy(raw["segments"])
    seg = next(s for s in grown if s.get("is_expandable"))
    old = seg["total_size"]
    seg["total_size"] = old + (2 << 20)
    seg["blocks"].append({"address": seg["address"] + old, "size": 2 << 20, "requested_size": 2 << 20,
                          "state": "active_allocated", "frames": []})
    state.apply(_delta(grown, table, t + 0.5))
    entries = state.seen[0]
    assert [(e["action"], e["addr"], e["size"]) for e in entries] == [
        ("segment_map", seg["address"] + old, 2 << 20), ("alloc", seg["address"] + old, 2 << 20)]
    model = build_live_model(state.raw_snapshot(with_seen=True), "live")
    from memtui.tui.views.device_view import build_device_view
    view = build_device_view(model, 0)
    final = view.replayer.state_at(view.n_events - 1)
    starts = [int(a) for a in final.seg_addr]
    assert len(starts) == len(set(starts))  # no address twice
    assert int(final.reserved) == int(view.reserved[-1]) == sum(s["total_size"] for s in grown)


def test_only_the_shown_device_s_ooms_are_announced_on_it():
    from memtui.live.views import ooms_on

    messages = [{"kind": "oom", "device": 1, "requested": 1}, {"kind": "oom", "device": 0, "requested": 2},
                {"kind": "oom", "requested": 3}]
    assert [m["requested"] for m in ooms_on(messages, 0)] == [2, 3]
    assert [m["requested"] for m in ooms_on(messages, 1)] == [1, 3]
