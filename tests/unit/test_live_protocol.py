"""The live protocol's pure parts: framing, the trace cursor, the watcher's state, the runtime folder."""

from __future__ import annotations

import os

import pytest

from memtui.errors import UsageError
from memtui.live import protocol as p
from memtui.live.delta import Cursor
from memtui.live.runtime import JobInfo, check_private, list_jobs, select_jobs, write_descriptor
from memtui.live.state import LiveState
from memtui.live.wire import FrameTable, pack_entries


def test_frames_survive_any_chunking():
    messages = [{"kind": "counters", "devices": [{"device": 0, "allocated": 1 << 40}]},
                {"kind": "delta", "traces": {0: [{"action": "alloc", "addr": 0x7F0000000000, "size": 512}]}},
                {"kind": "bye", "reason": "exit"}]
    data = b"".join(p.encode(m) for m in messages)
    for chunk in (1, 3, 7, len(data)):
        reader = p.FrameReader()
        got = []
        for i in range(0, len(data), chunk):
            got += reader.feed(data[i:i + chunk])
        assert got == messages
        assert reader.pending == 0


def test_damaged_or_oversized_frames_are_refused():
    with pytest.raises(p.ProtocolError):
        p.FrameReader(max_message=10).feed(p.encode({"kind": "x", "pad": "y" * 100}))
    with pytest.raises(p.ProtocolError):
        p.FrameReader().feed(p.HEADER.pack(3) + b"\xc1\xc1\xc1")
    with pytest.raises(p.ProtocolError):  # data, but not a message
        p.FrameReader().feed(p.HEADER.pack(1) + b"\x01")


def entry(t, action="alloc", addr=1, size=8):
    return {"time_us": t, "action": action, "addr": addr, "size": size, "stream": 0, "frames": []}


def test_cursor_finds_what_is_new_even_when_the_ring_wraps():
    cursor = Cursor()
    trace = [entry(i) for i in range(10)]
    new, gap = cursor.new_items(0, trace)
    assert len(new) == 10 and not gap
    trace += [entry(10), entry(10, "free_requested"), entry(10, "free_completed")]
    new, gap = cursor.new_items(0, trace)
    assert new == trace[10:] and not gap
    assert cursor.new_items(0, trace) == ([], False)
    # the ring buffer of 8 entries kept the last ones and two more came
    ring = trace[-6:] + [entry(11), entry(12)]
    new, gap = cursor.new_items(0, ring)
    assert new == [entry(11), entry(12)] and not gap
    # it wrapped past everything we saw: all is new, and the gap is said
    far = [entry(100 + i) for i in range(8)]
    new, gap = cursor.new_items(0, far)
    assert new == far and gap


def test_cursor_tells_repeated_entries_apart():
    cursor = Cursor()
    same = [entry(5, "alloc", 1, 8), entry(5, "free_requested", 1, 8)] * 3
    cursor.new_items(0, same[:4])
    new, gap = cursor.new_items(0, same)
    assert new == same[4:] and not gap


def packed(entries):
    return pack_entries(entries, FrameTable())


def test_state_applies_a_state_then_deltas_and_keeps_within_its_bound():
    state = LiveState(keep=5)
    state.apply({"kind": p.DELTA, "traces": {0: packed([entry(0)])}})  # no state yet: ignored
    assert state.events() == 0
    state.apply({"kind": p.STATE, "t": 1.0, "snapshot": {"segments": [{"device": 0}],
                                                          "device_traces": [packed([entry(1)])],
                                                          "allocator_settings": {"a": 1}}})
    state.apply({"kind": p.DELTA, "t": 2.0, "segments": [], "traces": {1: packed([entry(2)]),
                                                                        0: packed([entry(3), entry(4)])},
                 "annotations": [{"name": "x"}], "gap": True})
    raw = state.raw_snapshot()
    assert raw["device_traces"] == [[entry(1), entry(3), entry(4)], [entry(2)]]
    assert raw["segments"] == [] and raw["external_annotations"] == [{"name": "x"}] and state.gaps == 1
    state.apply({"kind": p.DELTA, "traces": {0: packed([entry(i) for i in range(5, 10)])}})
    assert [e["time_us"] for e in state.traces[0]] == [5, 6, 7, 8, 9] and state.trimmed == 3
    state.apply({"kind": p.COUNTERS, "t": 3.0, "devices": [{"device": 0, "allocated": 10, "reserved": 20,
                                                            "limit": 100, "unknown_field": 1}]})
    assert state.latest().devices[0].headroom == 90
    assert state.curve(0) == [(3.0, 10, 20)]
    state.apply({"kind": p.COUNTERS, "t": 4.0, "devices": [{"device": 0, "allocated": 11, "reserved": 20}]})
    assert state.curve(0, last=1) == [(4.0, 11, 20)] and len(state.curve(0, last=5)) == 2
    state.apply({"kind": p.MISSED, "dropped": 4})
    state.apply({"kind": p.MISSED, "dropped": 2})
    assert state.missed == 6
    state.end("killed")
    state.apply({"kind": p.BYE, "reason": "late"})
    assert state.ended and state.bye["reason"] == "late"


def test_runtime_folder_must_be_private(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    with pytest.raises(UsageError, match="open to other users"):
        check_private(str(open_dir))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    check_private(str(private))


def test_jobs_are_listed_alive_only_and_selected_by_pid_rank_or_name(tmp_path):
    folder = str(tmp_path)
    mine = os.getpid()
    jobs = []
    for rank in (0, 1):
        sock = os.path.join(folder, f"job-{mine}.rank{rank}.sock")
        open(sock, "w").close()
        info = JobInfo(pid=mine, socket=sock, rank=rank, started=10.0 + rank, argv=["train.py"], job="run1")
        write_descriptor(info)
        jobs.append(info)
    dead_sock = os.path.join(folder, "job-999999999.sock")
    open(dead_sock, "w").close()
    write_descriptor(JobInfo(pid=999_999_999, socket=dead_sock, started=5.0, argv=["old.py"], job="old"))
    found = list_jobs(folder)
    assert [(j.pid, j.rank) for j in found] == [(mine, 0), (mine, 1)]
    assert not os.path.exists(dead_sock)  # the dead job's files are cleaned away
    assert select_jobs(found, None) == found
    assert select_jobs(found, f"{mine}:1") == [found[1]]
    assert select_jobs(found, "run1") == found
    assert select_jobs(found, "train") == found
    assert select_jobs(found, "nothing") == []


def test_snapshots_travel_compact_and_come_back_the_same():
    import msgpack

    from memtui.live.wire import FrameTable, pack_snapshot, unpack_snapshot
    from memtui.load.read import read_snapshot

    root = os.path.join(os.path.dirname(__file__), "..", "..", "sample_snapshots")
    for name in ("train_linear_adam.pickle.xz", "oom_training.pickle.xz", "context_none.pickle.xz"):
        raw = read_snapshot(os.path.join(root, name))
        raw["device_traces"][0].append({"action": "odd", "addr": 1})  # an entry missing most keys
        table = FrameTable()
        packed = pack_snapshot(raw, table)
        wire = msgpack.unpackb(msgpack.packb({"s": packed, "f": table.frames}), strict_map_key=False)
        back = unpack_snapshot(wire["s"], wire["f"])
        assert msgpack.unpackb(msgpack.packb(back)) == msgpack.unpackb(msgpack.packb(raw)), name
        assert len(msgpack.packb(wire)) < len(msgpack.packb(raw))


def test_a_frame_table_never_names_a_new_frame_by_a_dead_one_s_identity():
    """torch hands out fresh frame dicts at every read and drops them after: a dict made
    later may take a dropped one's id (CPython reuses a freed dict's memory at once), and
    must still be named by what it says."""
    from memtui.live.wire import FrameTable, pack_entries, unpack_entries

    table = FrameTable()
    pack_entries([{"action": "alloc", "frames": [{"filename": "a.py", "line": 1, "name": "f"}]}], table)
    for i in range(50):
        table.new_read()
        read = [{"action": "alloc", "frames": [{"filename": "a.py", "line": 1, "name": "f"}]}]  # equal, not it
        assert unpack_entries(pack_entries(read, table), table.frames)[0]["frames"] == read[0]["frames"]
        del read  # freed here, by its count: its dicts' memory is free for the next ones
        table.new_read()
        other = [{"action": "free", "frames": [{"filename": "b.py", "line": i, "name": "g"}]}]
        assert unpack_entries(pack_entries(other, table), table.frames)[0]["frames"] == other[0]["frames"]


def test_segments_read_again_reuse_unchanged_blocks_and_carry_changed_ones():
    from memtui.live.wire import FrameTable, pack_segments, unpack_segments

    def read(line: int) -> list[dict]:  # fresh dicts each time, as torch gives them
        blocks = [{"address": 0, "size": 512, "state": "active_allocated",
                   "frames": [{"filename": "k.py", "line": 7, "name": "keep"}]},
                  {"address": 512, "size": 512, "state": "active_allocated",
                   "frames": [{"filename": "m.py", "line": line, "name": "move"}]}]
        return [{"address": 0, "total_size": 1024, "blocks": blocks}]

    table = FrameTable()
    first = pack_segments(read(1), table)
    table.new_read()
    second = pack_segments(read(2), table)
    assert second[0]["blocks"][0] is first[0]["blocks"][0]  # unchanged: packed once
    assert unpack_segments(second, table.frames) == read(2)
    assert unpack_segments(first, table.frames) == read(1)  # unpacking left the packed alone
