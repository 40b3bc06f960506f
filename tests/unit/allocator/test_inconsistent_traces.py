"""Traces that contradict themselves: every replay answers, and both loops answer alike.

A trace can free one address twice with no alloc between, free what it never allocated or
with another size, free segments it never had, and claim sizes of 0 or near 2^63. The state
at its first event is then reconstructed from contradictions (two blocks live at one
address, segments inferred from them overlapping), and the request stream asks for what no
device holds. ``memtui whatif``, the explorer's W pane and the replay ``memtui oom`` quotes
all replay it: each answers, and the compiled loop answers as the Python one does.
"""

from __future__ import annotations

import pytest

from memtui.allocator import native_replay
from memtui.allocator.replay import replay
from memtui.allocator.settings import parse_conf
from memtui.analysis.whatif import replay_ooms, what_if
from memtui.analysis.whatif_requests import build_requests
from memtui.open import open_snapshot
from tests.fixtures.opened import GIB, MIB, segment, write_snapshot

X, Y, BIG = 0x7F8E66000000, 0x7F8E62000000, 0x7F8CC0000000
HUGE = (1 << 63) - 1
CONFS = ("", "expandable_segments:True", "roundup_power2_divisions:[64:8,>:2]",
         "garbage_collection_threshold:0.6,max_split_size_mb:64")


def ev(action: str, addr: int, size: int, **extra) -> dict:
    return {"action": action, "addr": addr, "size": size, **extra}


def oom(size: int, device_free: int = 0) -> dict:
    return ev("oom", 0, size, device_free=device_free)


def busy() -> list[dict]:
    """A 2 GiB segment held by one block for the whole run, so that caps have something to hold."""
    return [segment(BIG, 2 * GIB, [(0, 2 * GIB, "active_allocated")])]


def held_expandable(addr: int, size: int) -> dict:
    """An expandable segment of ``size`` mapped bytes, all held by one block for the whole run."""
    return {**segment(addr, size, [(0, size, "active_allocated")]), "is_expandable": True}


# The file of the report: a real recording's trace replaced by these three events.
REPORTED = [ev("free_completed", X, 32 * MIB), ev("alloc", Y, 64 * MIB), ev("free_completed", X, 16 * MIB)]

TRACES = {
    "two frees of one address, no alloc between": (busy(), REPORTED),
    "the same, the snapshot listing no segment": ([], REPORTED),
    "the same with an OOM": (busy(), [*REPORTED, oom(GIB)]),
    "the same with an OOM under a per-process cap": (busy(), [*REPORTED, oom(GIB, 8 * GIB)]),
    "two frees of one address requested before any alloc": (busy(), [
        ev("free_requested", X, 32 * MIB), ev("free_requested", X, 16 * MIB), ev("alloc", Y, 64 * MIB),
        ev("free_completed", X, 32 * MIB), ev("free_completed", X, 16 * MIB), oom(GIB)]),
    "frees of overlapping ranges": (busy(), [
        ev("free_completed", X, 32 * MIB), ev("free_completed", X + 16 * MIB, 32 * MIB), ev("alloc", Y, 64 * MIB),
        oom(GIB)]),
    "a free whose size is not its alloc's": (busy(), [
        ev("free_requested", X, 64 * MIB), ev("free_completed", X, 16 * MIB), ev("alloc", X, 8 * MIB),
        ev("alloc", X + 8 * MIB, 8 * MIB), oom(GIB)]),
    "sizes of 0": (busy(), [
        ev("free_completed", X, 0), ev("free_completed", X, 0), ev("alloc", Y, 0), ev("alloc", Y, 0),
        ev("free_requested", Y, 0), ev("free_completed", Y, 0), oom(0)]),
    "an alloc of 2^63 - 1 bytes": (busy(), [ev("alloc", Y, HUGE), ev("alloc", X, 64 * MIB), oom(GIB)]),
    "allocs of 2^62 bytes": (busy(), [ev("alloc", Y, (1 << 62) + 1), ev("alloc", X, (1 << 62) + 1), oom(GIB)]),
    "a free of 2^63 - 1 bytes": (busy(), [
        ev("free_completed", X, HUGE), ev("free_completed", X, 32 * MIB), ev("alloc", Y, 64 * MIB), oom(GIB)]),
    "segments of 2^62 bytes freed twice": (busy(), [
        ev("segment_free", X, 1 << 62), ev("segment_free", X, 1 << 62), ev("alloc", X, 64 * MIB), oom(GIB)]),
    "a mapped range of 2^63 - 1 bytes": (busy(), [
        ev("segment_map", X, HUGE), ev("segment_unmap", X - 64 * MIB, 64 * MIB), ev("alloc", Y, 64 * MIB),
        oom(GIB)]),
    "a segment at address 0": ([segment(0, 128 * MIB, [])], [
        ev("segment_alloc", Y, 20 * MIB), ev("alloc", Y, 2 * MIB), ev("oom", 0, 20 * MIB), ev("alloc", X, 20 * MIB)]),
    # The model reserves 108 GiB of address space for an expandable segment; the next one is
    # 80 MiB above this one: growing the first must not map over the second.
    "expandable segments closer than the model's reservation": (
        [held_expandable(X - GIB, 60 * MIB), held_expandable(X - GIB + 80 * MIB, 40 * MIB)],
        [ev("alloc", Y + k * 20 * MIB, 20 * MIB) for k in range(6)]),
    "a life freed again after empty_cache took its pending free": (busy(), [
        ev("alloc", X, 2 * MIB), ev("free_requested", X, 2 * MIB), ev("alloc", X + 32 * MIB, 32 * MIB),
        ev("alloc", X + 64 * MIB, 20 * MIB), ev("alloc", X + 96 * MIB, 128 * MIB), ev("segment_free", Y, 512),
        ev("alloc", X + 256 * MIB, GIB), ev("free_requested", X, 128 * MIB), ev("free_completed", X, GIB),
        ev("segment_free", X, 512)]),
}


def outcome(o):
    return (o.events, o.reserved_peak, o.peak_event, o.active_at_peak, o.allocated_at_peak, o.oom_event,
            o.oom_size, o.recorded_ooms, o.stopped_at, o.retries, o.series_reserved.tolist(),
            o.series_allocated.tolist())


def opened(tmp_path, name: str):
    segments, trace = TRACES[name]
    snapshot = open_snapshot(write_snapshot(tmp_path / "t.pickle", segments, [dict(e) for e in trace]))
    return snapshot, snapshot.devices[0]


@pytest.mark.parametrize("name", list(TRACES))
def test_whatif_and_the_oom_replay_answer(tmp_path, name):
    snapshot, dev = opened(tmp_path, name)
    for cap in (None, GIB, 3 * GIB):
        result = what_if(snapshot, dev.device, None, cap, workers=1)
        assert result.scenarios and all(s.reserved_peak >= 0 for s in result.scenarios)
    replay_ooms(snapshot, dev)


@pytest.mark.parametrize("name", list(TRACES))
def test_the_oom_diagnosis_answers(tmp_path, name):
    from memtui.analysis.oom import diagnose_ooms

    snapshot, dev = opened(tmp_path, name)
    for diagnosis in diagnose_ooms(snapshot, dev.device):
        assert diagnosis.verdict and diagnosis.evidence


@pytest.mark.skipif(not native_replay.available, reason="memtui built without its compiled part")
@pytest.mark.parametrize("name", list(TRACES))
def test_both_loops_agree(tmp_path, name):
    _, dev = opened(tmp_path, name)
    requests = build_requests(dev)
    assert native_replay.can_replay(requests)  # the compiled loop takes them: a comparison, not a fallback
    peak = replay(requests, parse_conf(""), native=False).reserved_peak
    for conf in CONFS:
        for limit, per_process, hints in ((None, False, True), (int(peak * 0.8), True, False),
                                          (int(peak * 0.95), False, False), (0, True, True), (-5, False, False),
                                          ((1 << 63) + 5, True, False)):
            kw = dict(limit=limit, per_process=per_process, use_hints=hints, hints_per_process=requests.process_cap,
                      series=True)
            python = replay(requests, parse_conf(conf), native=False, **kw)
            compiled = replay(requests, parse_conf(conf), native=True, **kw)
            assert outcome(compiled) == outcome(python), (conf, limit, per_process, hints)


def test_the_reported_file_keeps_one_block_per_address(tmp_path):
    from memtui.allocator.replay import consistent_initial

    _, dev = opened(tmp_path, "two frees of one address, no alloc between")
    requests = build_requests(dev)
    # The state memtui reconstructs before the first event holds both freed blocks at X, and a
    # segment inferred for each; the allocator is given one segment and the first block.
    at_x = [s for s in requests.initial if s.addr == X]
    assert [(s.size, [b[:2] for b in s.blocks]) for s in at_x] == [(32 * MIB, [(X, 32 * MIB)])]
    assert consistent_initial(requests.initial) == requests.initial
    # The first free gives the block back, the alloc finds no room in it, the second free
    # names a block that was never there: one new segment, under any cap that holds it.
    expected = [(3, requests.lowest_address - 1024 * MIB - 64 * MIB, 64 * MIB, 1)]
    reserved = sum(s.size for s in requests.initial)
    for limit in (None, reserved + 64 * MIB):
        for native in (False, True):
            out = replay(requests, parse_conf(""), limit=limit, per_process=True, native=native)
            assert out.events == expected and out.oom_event is None
    # Below that the 32 MiB segment goes back to the device first, as torch's retry does.
    for native in (False, True):
        capped = replay(requests, parse_conf(""), limit=reserved + 40 * MIB, per_process=True, native=native)
        assert capped.oom_event is None and [e[0] for e in capped.events] == [4, 3]


def test_a_consistent_state_is_left_as_it_is(monkeypatch):
    # The state as reconstructed, before consistent_initial (build_requests calls it last),
    # against what consistent_initial makes of it: the same, segment for segment.
    import memtui.analysis.whatif_requests as whatif_requests
    from memtui.allocator.replay import consistent_initial
    from tests.conftest import SAMPLES
    from tests.fixtures.opened import cached

    snapshot = cached(str(SAMPLES / "recorded" / "ring_wrapped.pickle.xz"))
    monkeypatch.setattr(whatif_requests, "consistent_initial", lambda initial: initial)
    as_reconstructed = build_requests(snapshot.devices[snapshot.default_device()]).initial
    assert as_reconstructed and len(as_reconstructed) > 1
    assert consistent_initial(as_reconstructed) == as_reconstructed


def test_overlapping_segments_and_blocks_are_made_disjoint():
    from memtui.allocator.replay import InitialSegment, consistent_initial
    from memtui.allocator.simulator import MAX_DEVICE_BYTES

    def seg(addr, size, blocks=()):
        return InitialSegment(addr, size, 0, -1, False, False, list(blocks))

    given = [
        seg(X, 16 * MIB, [(X, 32 * MIB, 1, False), (X, 16 * MIB, 2, False)]),  # blocks past its end, overlapping
        seg(X, 32 * MIB),  # the larger one at the same address is kept
        seg(X + 16 * MIB, 64 * MIB, [(X + 40 * MIB, MIB, 3, True)]),  # overlaps the kept one: left out
        seg(X + 64 * MIB, 0),  # empty
        seg(X + 128 * MIB, 20 * MIB, [(X + 128 * MIB, 0, 4, False), (X + 130 * MIB, 2 * MIB, 5, True),
                                      (X + 131 * MIB, 2 * MIB, 6, False), (X + 147 * MIB, 4 * MIB, 7, False)]),
        seg(X + GIB, MAX_DEVICE_BYTES),  # would take the reserved bytes past any device
    ]
    kept = consistent_initial(given)
    assert [(s.addr, s.size, s.blocks) for s in kept] == [
        (X, 32 * MIB, [(X, 32 * MIB, 1, False)]),
        (X + 128 * MIB, 20 * MIB, [(X + 130 * MIB, 2 * MIB, 5, True)]),
    ]


def test_no_device_serves_a_request_past_its_bytes():
    from memtui.allocator.addresses import AddressSpace
    from memtui.allocator.simulator import MAX_DEVICE_BYTES, Simulator

    for conf in ("", "expandable_segments:True"):
        sim = Simulator(parse_conf(conf), AddressSpace([], 1 << 46))
        assert sim.malloc(HUGE, 0) is None and sim.malloc(MAX_DEVICE_BYTES + 1, 0) is None
        assert sim.reserved == 0 and sim.malloc(64 * MIB, 0) is not None
    # With expandable segments, a request larger than the whole reserved range maps it and
    # is refused, as the device would (it cannot grow past the range).
    sim = Simulator(parse_conf("expandable_segments:True"), AddressSpace([], 1 << 46), device_total=GIB)
    assert sim.malloc(2 * GIB, 0) is None


@pytest.mark.skipif(not native_replay.available, reason="memtui built without its compiled part")
def test_an_inconsistent_state_is_not_reported_as_running_out_of_memory(tmp_path):
    from dataclasses import replace

    from memtui.allocator.replay import InitialSegment

    _, dev = opened(tmp_path, "two frees of one address, no alloc between")
    requests = build_requests(dev)
    # The state the replay was given before: the two blocks at X in the 16 MiB segment, and
    # the 32 MiB segment at X too. Handed that, the compiled loop says what went wrong.
    broken = [s for s in requests.initial if s.addr != X] + [
        InitialSegment(X, 32 * MIB, 0, -1, False, False, []),
        InitialSegment(X, 16 * MIB, 0, -1, False, False, [(X, 32 * MIB, 1, False), (X, 16 * MIB, 2, False)])]
    requests = replace(requests, initial=sorted(broken, key=lambda s: s.addr))
    reserved = sum(s.size for s in requests.initial)
    with pytest.raises(RuntimeError, match="inconsistent"):
        replay(requests, parse_conf(""), limit=reserved, per_process=True, native=True)


def test_an_expandable_segment_grows_up_to_the_next_one_only(tmp_path):
    _, dev = opened(tmp_path, "expandable segments closer than the model's reservation")
    requests = build_requests(dev)
    low, high = (s.addr for s in requests.initial)
    for native in (False, True):
        out = replay(requests, parse_conf("expandable_segments:True"), native=native)
        mapped = [(addr, size) for code, addr, size, _ in out.events]
        # The 20 MiB page between the two, then new ranges: never the second segment's bytes.
        assert mapped[0] == (low + 60 * MIB, 20 * MIB)
        assert all(addr + size <= high or addr >= high + 40 * MIB for addr, size in mapped)
        assert len(set(mapped)) == len(mapped)
