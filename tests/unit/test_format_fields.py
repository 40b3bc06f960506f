"""What newer torch writes, field by field, in every headless view: the model, ``memtui
stack``, ``events --json``, ``info``, ``check``, the filter, export/reopen and ``convert``.

Every file is a recording of sample_snapshots/format (torch 2.11 on an H100) or a fixture
built from one the way a newer torch writes it (tests/fixtures/newer_torch.py).
"""

from __future__ import annotations

import json
import lzma
import pickle
import pickletools

import numpy as np
import pytest

from memtui.analysis.callsites import CallSites
from memtui.analysis.live import life_spans
from memtui.cli import main
from memtui.export.convert import convert_file, memory_viz_frame_lines
from memtui.export.writer import export_snapshot
from memtui.load.read import read_snapshot
from memtui.model import actions as act
from memtui.model.checks import check_snapshot
from memtui.model.lifetimes import NONE
from memtui.model.relevance import FORWARD_TEXT, is_internal_frame
from memtui.open import open_plain, open_snapshot, open_streaming
from memtui.query import compile_filter
from memtui.replay import Replayer
from memtui.services.stack import allocation_json
from tests.fixtures import newer_torch
from tests.fixtures.model_equality import assert_same_model

FORMAT = newer_torch.FORMAT


def path(name: str) -> str:
    return str(FORMAT / f"{name}.pickle.xz")


def load(name: str):
    return open_snapshot(path(name), cache=None)


def raw(name: str) -> dict:
    with lzma.open(path(name)) as f:
        return pickle.load(f)


def cli(args, capsys) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


def reopened(snapshot, tmp_path, filter_text: str = ""):
    out = tmp_path / "out.msgpack"
    export_snapshot(snapshot, out, filter_text, force=True)
    return open_snapshot(out, cache=None), out


def converted(source, tmp_path) -> tuple[dict, bytes]:
    out = tmp_path / "out.pickle"
    convert_file(str(source), str(out), force=True)
    data = out.read_bytes()
    return pickle.loads(data), data


def first(dev, action: int, where) -> int:
    return next(i for i in range(len(dev.trace)) if int(dev.trace.action[i]) == action and where(i))


# -- the fixtures are what the builder makes ---------------------------------------------------


@pytest.mark.parametrize("name", list(newer_torch.FIXTURES))
def test_committed_fixtures_are_what_the_builder_makes(name):
    with lzma.open(newer_torch.fixture_path(name)) as f:
        assert f.read() == newer_torch.fixture_bytes(name)


# -- forward_frames (torch 2.11 with anomaly mode) ---------------------------------------------


def test_forward_frames_become_the_backward_allocations_label_and_call_site():
    snapshot = load("backward_anomaly")
    dev = snapshot.devices[0]
    source = raw("backward_anomaly")["device_traces"][0]
    i = first(dev, act.ALLOC, lambda i: dev.trace.fwd[i] >= 0)
    assert dev.trace.stack[i] < 0  # stacks="python": the autograd thread has no frames of its own
    assert snapshot.stacks.forward_lines(int(dev.trace.fwd[i])) == source[i]["forward_frames"]
    label = snapshot.event_top_frame(0, i)
    assert label.endswith("record.py:103 backward_anomaly (backward)")
    # Call sites group the backward allocations by that forward line, in every analysis.
    spans = life_spans(dev)
    sites = CallSites(snapshot.stacks)
    life = int(dev.lives.event_life[i])
    assert sites.label(sites.of_stack(int(spans.stack[life]))) == label
    assert (dev.blocks.fwd >= 0).any() and (dev.segments.fwd >= 0).any()  # blocks and segments carry them too


def test_forward_frames_name_the_forward_line_over_a_cpp_backward_stack():
    snapshot = load("backward_anomaly_all")
    dev = snapshot.devices[0]
    i = first(dev, act.ALLOC, lambda i: dev.trace.fwd[i] >= 0 and dev.trace.stack[i] >= 0)
    assert snapshot.stacks.top_frame_text(int(dev.trace.stack[i])).endswith("[C++]")  # its own stack: a node
    assert snapshot.event_top_frame(0, i).endswith("(backward)")


def test_forward_frames_in_stack_events_filter_export_and_convert(tmp_path, capsys):
    snapshot = load("backward_anomaly")
    dev = snapshot.devices[0]
    i = first(dev, act.ALLOC, lambda i: dev.trace.fwd[i] >= 0)
    name = dev.event_address_n(i)
    info = allocation_json(snapshot, name)
    forward = info["events"]["alloc"]["forward_stack"]
    assert forward[0]["name"] == "backward_anomaly" and "loss = model(x)" in forward[0][FORWARD_TEXT]
    text = cli(["stack", path("backward_anomaly"), name], capsys)
    assert "forward stack" in text and "loss = model(x).square().mean()" in text
    row = json.loads(cli(["events", path("backward_anomaly"), "--start", str(i), "--limit", "1", "--json"], capsys))[0]
    assert row["forward_top_frame"].endswith("record.py:103 backward_anomaly (backward)")
    # A frame term finds a backward allocation by its forward line.
    assert i in compile_filter("file:record.py:103 action:alloc").indices(snapshot, 0)
    back, out = reopened(snapshot, tmp_path)
    assert back.stacks.forward_lines(int(back.devices[0].trace.fwd[i])) == snapshot.stacks.forward_lines(
        int(dev.trace.fwd[i]))
    assert back.event_top_frame(0, i) == snapshot.event_top_frame(0, i)
    for source in (path("backward_anomaly"), out):
        written, _ = converted(source, tmp_path)
        assert written["device_traces"][0][i]["forward_frames"] == raw("backward_anomaly")["device_traces"][0][i][
            "forward_frames"]


# -- FX frames (augment_with_fx_traces) ---------------------------------------------------------


def test_fx_frames_keep_their_node_and_are_labelled_by_the_models_line(tmp_path, capsys):
    snapshot = load("fx_module")
    dev = snapshot.devices[0]
    frames = snapshot.frames
    fx = [f for f in range(len(frames)) if frames.extra(f, "fx_node_name")]
    assert fx and all(frames.generated[f] and not frames.user[f] for f in fx)
    assert any(frames.extra(f, "fx_original_trace") for f in fx)
    i = first(dev, act.ALLOC, lambda i: snapshot.strings[int(dev.trace.ctx[i])] != "N/A")
    label = snapshot.event_top_frame(0, i)
    assert "fx_generated" not in label and label.endswith("record.py:206 forward")  # a = self.net1(x)
    info = allocation_json(snapshot, dev.event_address_n(i))
    shown = [f for f in info["events"]["alloc"]["stack"] if "fx_node_name" in f]
    assert shown[0]["fx_node_name"] == "addmm" and "a = self.net1(x)" in shown[0]["fx_original_trace"]
    text = cli(["stack", path("fx_module"), dev.event_address_n(i)], capsys)
    assert "fx node addmm call_function aten.addmm.default" in text and "| " in text
    row = json.loads(cli(["events", path("fx_module"), "--start", str(i), "--limit", "1", "--json"], capsys))[0]
    assert row["top_frame"] == label and row["compile_context"] == "Torch-Compiled Region: 0/0"
    assert i in compile_filter('ctx:"Torch-Compiled Region" frame:fx_generated').indices(snapshot, 0)
    back, out = reopened(snapshot, tmp_path)
    assert back.event_top_frame(0, i) == label
    source_frames = raw("fx_module")["device_traces"][0][i]["frames"]
    for src in (path("fx_module"), out):
        written, _ = converted(src, tmp_path)
        assert written["device_traces"][0][i]["frames"] == source_frames


def test_fx_frames_without_an_original_trace_fall_to_the_users_call():
    """torch 2.11 writes no fx_original_trace for nn.Sequential's torch modules: the label
    is the user's line that called the compiled model, never the generated file."""
    snapshot = load("fx_compile")
    dev = snapshot.devices[0]
    i = first(dev, act.ALLOC, lambda i: snapshot.strings[int(dev.trace.ctx[i])] != "N/A")
    assert "record.py" in snapshot.event_top_frame(0, i) and "fx_generated" not in snapshot.event_top_frame(0, i)


# -- annotate entries (newer torch: _annotate_memory) ------------------------------------------


def test_annotations_label_the_allocation_live_at_their_address(tmp_path, capsys):
    snapshot = load("annotate")
    dev = snapshot.devices[0]
    notes = dev.annotations
    labels = [snapshot.strings[int(dev.trace.meta[j])] for j in notes.event]
    assert labels == ['{"role":"eval output"}', "layer0.weight", "allocated before recording", "scratch, first life"]
    # The eval output and the scratch tensor's first life were allocated in the trace ...
    assert notes.life[0] != NONE and notes.life[3] != NONE
    # ... the weight and the early tensor before it: ghost blocks of the snapshot.
    assert notes.life[1] == NONE and dev.ghost_blocks[int(notes.block[1])]
    # The scratch address was allocated again: the label stays with the first life only.
    scratch = int(notes.life[3])
    again = int(dev.lives.find(int(dev.lives.addr[scratch]), int(dev.lives.version[scratch]) + 1))
    assert again != NONE and not len(notes.of_life(again))
    assert dev.event_address_n(int(notes.event[3])) == dev.event_address_n(int(dev.lives.start[scratch]))
    weight = allocation_json(snapshot, dev.event_address_n(int(notes.event[1])))
    assert weight["block"]["ghost"] and [a["label"] for a in weight["annotations"]] == ["layer0.weight"]
    assert weight["annotations"][0]["stack"][0]["name"] == "annotate"
    text = cli(["stack", path("annotate"), dev.event_address_n(int(notes.event[0]))], capsys)
    assert "annotation at event" in text and "role=eval output" in text
    rows = json.loads(cli(["events", path("annotate"), "--json", "--limit", "0"], capsys))
    marks = [r for r in rows if r["action"] == "annotate"]
    assert [r["address_n"] for r in marks] == [dev.event_address_n(int(j)) for j in notes.event]
    assert marks[0]["metadata"] == {"role": "eval output"}
    # meta: finds the annotate entries, and every event of an allocation they label.
    hits = compile_filter('meta:"role=eval output"').indices(snapshot, 0)
    life = int(notes.life[0])
    assert int(notes.event[0]) in hits and int(dev.lives.start[life]) in hits
    assert set(compile_filter("action:annotate").indices(snapshot, 0)) == set(notes.event.tolist())
    back, out = reopened(snapshot, tmp_path)
    assert [back.devices[0].event_address_n(int(j)) for j in notes.event] == [
        dev.event_address_n(int(j)) for j in notes.event]
    entries = [e for e in raw("annotate")["device_traces"][0] if e["action"] == "annotate"]
    for src in (path("annotate"), out):
        written, _ = converted(src, tmp_path)
        assert [e for e in written["device_traces"][0] if e["action"] == "annotate"] == entries


# -- user_metadata: text, compact JSON (newer torch from a dict), a dict itself ---------------


@pytest.mark.parametrize("name", ["metadata", "metadata_dicts"])
def test_structured_metadata_reads_as_key_value_and_filters_by_key(name, tmp_path, capsys):
    snapshot = load(name)
    dev = snapshot.devices[0]
    evals = compile_filter("meta:phase=eval").indices(snapshot, 0)
    trains = compile_filter("meta:phase=train").indices(snapshot, 0)
    assert len(evals) and len(trains) and not set(evals) & set(trains)
    assert set(compile_filter("meta:step=1").indices(snapshot, 0)) >= set(evals)
    assert len(compile_filter("meta:warmup").indices(snapshot, 0)) == 3  # free text, as before
    i = int(evals[0])
    row = json.loads(cli(["events", path(name), "--start", str(i), "--limit", "1", "--json"], capsys))[0]
    assert row["metadata"] == {"phase": "eval", "step": 1}
    assert allocation_json(snapshot, row["address_n"])["events"]["alloc"]["user_metadata"] == "phase=eval step=1"
    assert "[phase=eval step=1]" in cli(["stack", path(name), row["address_n"]], capsys)
    assert row["user_metadata"] == ({"phase": "eval", "step": 1} if name == "metadata_dicts"
                                    else '{"phase":"eval","step":1}')
    back, out = reopened(snapshot, tmp_path)
    assert list(compile_filter("meta:phase=eval").indices(back, 0)) == list(evals)
    source = raw(name)["device_traces"][0][i]["user_metadata"]
    for src in (path(name), out):
        written, _ = converted(src, tmp_path)
        assert written["device_traces"][0][i]["user_metadata"] == source  # a dict stays a dict, text stays text
    assert (int(dev.trace.meta[i]) in snapshot.strings.dict_ids) == (name == "metadata_dicts")


# -- skip_actions traces ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["skip_free_completed", "skip_requested_segments"])
def test_skip_actions_traces_pair_and_replay_and_are_not_corrupt(name, tmp_path, capsys):
    snapshot = load(name)
    dev = snapshot.devices[0]
    findings = check_snapshot(snapshot)
    assert not [f for f in findings if f.level == "warning"], findings
    assert any("skip_actions" in f.message for f in findings)
    # One allocation per alloc: no address allocated twice in one life.
    allocs = dev.trace.action == act.ALLOC
    lives = dev.lives.event_life[allocs]
    assert len(np.unique(lives)) == int(allocs.sum())
    replayer = Replayer(dev)
    for i in range(-1, len(dev.trace)):
        state = replayer.state_at(i)
        assert 0 <= state.allocated <= state.reserved and (state.blk_segment != NONE).all(), i
    freed = compile_filter("action:alloc freed").indices(snapshot, 0)
    assert len(freed) == int(np.count_nonzero(dev.lives.end[dev.lives.start != NONE] != NONE))
    rows = json.loads(cli(["events", path(name), "--json", "--limit", "0"], capsys))
    names = [r["address_n"] for r in rows if r["action"] == "alloc"]
    assert len(names) == len(set(names))
    freed = next(r for r in rows if r["action"] == "alloc" and dev.lives.end[dev.lives.event_life[r["index"]]] != NONE)
    ends = set(allocation_json(snapshot, freed["address_n"])["events"]) - {"alloc"}
    assert ends == ({"free_requested"} if name == "skip_free_completed" else {"free_completed"})
    back, out = reopened(snapshot, tmp_path)
    assert [back.devices[0].event_address_n(r) for r in range(len(back.devices[0].trace))] == [
        dev.event_address_n(r) for r in range(len(dev.trace))]
    written, _ = converted(out, tmp_path)
    assert written["device_traces"][0] == raw(name)["device_traces"][0]


def test_a_trace_without_segment_events_places_freed_memory_in_inferred_segments():
    """Recorded with segment_alloc/segment_free skipped, memory emptied from the cache before
    the dump lies in no segment the snapshot lists: it stands in a segment of its own."""
    snap = raw("skip_requested_segments")
    trace = snap["device_traces"][0]
    listed = [(s["address"], s["address"] + s["total_size"]) for s in snap["segments"]]
    gone = max(hi for _, hi in listed) + (1 << 30)
    trace.append({**trace[0], "action": "alloc", "addr": gone, "size": 4096})
    trace.append({**trace[0], "action": "free_completed", "addr": gone, "size": 4096})
    from memtui.load.normalize import normalize
    from memtui.model import build_model

    dev = build_model(normalize(snap, "x")).devices[0]
    state = Replayer(dev).state_at(len(dev.trace) - 2)
    assert (state.blk_segment != NONE).all() and state.allocated <= state.reserved


# -- ring buffer overflow (newer torch: trace_alloc_overflowed) -------------------------------


def test_an_overflowed_ring_buffer_is_said_where_the_trace_starts(tmp_path, capsys):
    snapshot = load("ring_overflowed")
    assert snapshot.trace_overflowed and snapshot.trace_max_entries == 300
    info = json.loads(cli(["info", path("ring_overflowed"), "--json"], capsys))
    assert info["devices"][0]["trace"]["overflowed"] is True and info["devices"][0]["trace"]["max_entries"] == 300
    assert any("ring buffer overflowed" in w for w in info["warnings"])
    assert "overflowed" in cli(["info", path("ring_overflowed")], capsys)
    assert "ring buffer overflowed" in cli(["events", path("ring_overflowed"), "--limit", "2"], capsys).splitlines()[0]
    assert any("overflowed" in f.message for f in check_snapshot(snapshot))
    plain = json.loads(cli(["info", path("ring_overflow"), "--json"], capsys))
    assert plain["devices"][0]["trace"]["overflowed"] is False and not plain["warnings"]
    back, out = reopened(snapshot, tmp_path)
    assert back.trace_overflowed
    written, _ = converted(out, tmp_path)
    assert written["allocator_settings"]["trace_alloc_overflowed"] is True


# -- private pools ----------------------------------------------------------------------------


def test_private_pools_are_named_and_filtered(tmp_path, capsys):
    snapshot = load("private_pools")
    truth = newer_torch.truth("private_pools")
    dev = snapshot.devices[0]
    info = json.loads(cli(["info", path("private_pools"), "--json"], capsys))
    names = {p["name"]: p["id"] for p in info["devices"][0]["pools"]}
    assert names == {"default pool": [0, 0], "graph pool 1": truth["graph_pool"], "mempool 1": truth["mempool_id"]}
    mempool = compile_filter("pool:mempool").indices(snapshot, 0)
    assert list(mempool) == list(compile_filter("pool:0,1").indices(snapshot, 0)) and len(mempool)
    graph = compile_filter("pool:graph1").indices(snapshot, 0)
    private = set(compile_filter("pool:private").indices(snapshot, 0))
    assert private == set(graph) | set(mempool) and not private & set(compile_filter("pool:default").indices(
        snapshot, 0))
    addr = truth["mempool_tensor"]
    block = int(np.flatnonzero(dev.blocks.address == addr)[0])
    assert allocation_json(snapshot, dev.block_address_n(block))["pool"] == "mempool 1"
    back, out = reopened(snapshot, tmp_path)
    assert sorted(map(tuple, back.devices[0].segments.pools)) == sorted(map(tuple, dev.segments.pools))
    written, _ = converted(out, tmp_path)
    assert sorted(s["segment_pool_id"] for s in written["segments"]) == sorted(
        s["segment_pool_id"] for s in raw("private_pools")["segments"])


def test_entry_pool_ids_name_each_events_pool(tmp_path, capsys):
    """Newer torch records each entry's pool_id: the event's pool without asking the segments."""
    snapshot = load("pool_ids")
    dev = snapshot.devices[0]
    assert sorted(dev.trace.pools) == [(0, 0), (0, 1), (1, 0)] and (dev.trace.pool >= 0).all()
    names = [r["pool"] for r in json.loads(cli(["events", path("pool_ids"), "--json", "--limit", "0"], capsys))]
    assert names.count("graph pool 1") == 18 and names.count("mempool 1") == 5
    segments_only = load("private_pools")
    for text in ("pool:graph", "pool:mempool1", "pool:default", "pool:private"):
        assert list(compile_filter(text).indices(snapshot, 0)) == list(compile_filter(text).indices(segments_only, 0))
    # An entry's own pool_id wins over its address (a segment reused by another pool since).
    snap = raw("pool_ids")
    i = next(k for k, e in enumerate(snap["device_traces"][0]) if e["pool_id"] == (1, 0))
    snap["device_traces"][0][i]["pool_id"] = (0, 7)
    from memtui.load.normalize import normalize
    from memtui.model import build_model

    moved = build_model(normalize(snap, "x"))
    assert i in compile_filter("pool:mempool7").indices(moved, 0) and i not in compile_filter("pool:graph").indices(
        moved, 0)
    back, out = reopened(snapshot, tmp_path)
    assert [back.devices[0].event_pool(r) for r in range(len(dev.trace))] == [
        dev.event_pool(r) for r in range(len(dev.trace))]
    written, _ = converted(out, tmp_path)
    assert [e["pool_id"] for e in written["device_traces"][0]] == [e["pool_id"] for e in raw("pool_ids")[
        "device_traces"][0]]


def test_a_mempool_snapshot_is_a_segment_list(capsys):
    """``MemPool.snapshot()`` returns the pool's segments alone: opened as a snapshot with no trace."""
    snapshot = load("private_pools.mempool")
    assert not any(len(d.trace) for d in snapshot.devices)
    info = json.loads(cli(["info", path("private_pools.mempool"), "--json"], capsys))
    assert [p["name"] for p in info["devices"][0]["pools"]] == ["mempool 1"]
    assert not snapshot.devices[0].ghost_blocks.any()  # no trace: nothing to call a ghost


# -- ghost blocks ------------------------------------------------------------------------------


def test_ghost_blocks_are_the_live_blocks_no_event_allocated(capsys):
    snapshot = load("metadata")
    dev = snapshot.devices[0]
    ghosts = np.flatnonzero(dev.ghost_blocks)
    assert len(ghosts) and (dev.block_life[ghosts] == NONE).all()
    info = allocation_json(snapshot, dev.block_address_n(int(ghosts[0])))
    assert info["block"]["ghost"] and not info["alloc_in_trace"]
    assert "ghost block" in cli(["stack", path("metadata"), dev.block_address_n(int(ghosts[0]))], capsys)
    assert json.loads(cli(["info", path("metadata"), "--json"], capsys))["devices"][0]["ghost_blocks"] == len(ghosts)


# -- pickle protocols --------------------------------------------------------------------------

# The opcodes memory_viz's JavaScript unpickler reads (MemoryViz.js ``unpickle``), protocols 2-4.
MEMORY_VIZ_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST", "TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "SETITEM", "SETITEMS", "APPEND", "APPENDS", "MEMOIZE", "BINPUT",
    "LONG_BINPUT", "BINGET", "LONG_BINGET", "SHORT_BINUNICODE", "BINUNICODE", "BININT", "BININT1", "BININT2",
    "LONG1", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE",
}


def readable_by_memory_viz(data: bytes) -> bool:
    for op, arg, _ in pickletools.genops(data):
        if op.name not in MEMORY_VIZ_OPCODES:
            return False
        if op.name == "PROTO" and not 2 <= arg <= 4:
            return False
        if op.name == "LONG1" and not -(1 << 63) <= arg < 1 << 63:  # at most 8 bytes
            return False
    return True


def test_protocol_5_reads_alike_on_both_decoders():
    """Python 3.14's pickle.dump writes protocol 5: both decoders read it, as the protocol 4 original."""
    assert newer_torch.fixture_bytes("protocol5")[:2] == b"\x80\x05"
    streamed = open_streaming(path("protocol5"))
    assert streamed is not None  # the streaming decoder, not its fallback
    assert_same_model(streamed, open_plain(path("protocol5")))
    original = open_plain(path("backward_anomaly"))
    assert streamed.strings.values == original.strings.values
    assert np.array_equal(streamed.devices[0].trace.fwd, original.devices[0].trace.fwd)


@pytest.mark.parametrize("name", ["protocol5", "annotate", "metadata_dicts", "fx_module", "fx_compile",
                                  "ring_overflowed", "private_pools", "private_pools.mempool", "pool_ids",
                                  "skip_free_completed", "backward_anomaly_all"])
def test_convert_writes_what_memory_viz_reads(name, tmp_path):
    written, data = converted(path(name), tmp_path)
    assert data[:2] == b"\x80\x04" and readable_by_memory_viz(data)
    want = read_snapshot(path(name))
    memory_viz_frame_lines(want)
    assert written == want


def test_convert_writes_torchs_missing_frame_lines_as_memory_viz_reads_them(tmp_path):
    """Torch 2.11 writes an FX frame's missing line as 2**64 - 1: memory_viz's unpickler
    refuses the whole file. convert writes -1 (the same 64 bits); nothing else changes."""
    source = raw("fx_module")
    lines = [f["line"] for t in source["device_traces"] for e in t for f in e.get("frames") or []]
    assert (1 << 64) - 1 in lines
    assert not readable_by_memory_viz(pickle.dumps(source, protocol=4))
    written, data = converted(path("fx_module"), tmp_path)
    assert readable_by_memory_viz(data)
    got = [f["line"] for t in written["device_traces"] for e in t for f in e.get("frames") or []]
    assert got == [-1 if n == (1 << 64) - 1 else n for n in lines]


# -- other accelerators ---------------------------------------------------------------------


def test_other_accelerators_allocator_frames_are_internal_too():
    assert is_internal_frame("??", "c10::xpu::XPUCachingAllocator::malloc(...)")
    assert is_internal_frame("??", "at::native::empty_xpu(c10::ArrayRef<long>, ...)")
    assert is_internal_frame("??", "at::detail::empty_strided_mps(...)")
    assert not is_internal_frame("??", "at::native::addmm_out_xpu(...)")
