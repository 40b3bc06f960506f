"""Autocast's cast cache, recorded with Python stacks only: one forward's casts of the
weights are let go together when the autocast block exits, while that forward's
activations (made at the same line, later) stay for backward. "The newest left alive" is
the collector's signature only across iterations; inside one, Python stacks cannot
separate the causes, so the answer is not "cycles"."""

from __future__ import annotations

from memtui.analysis.cycles import find_cycles
from memtui.open import open_snapshot
from tests.fixtures.opened import frame, write_snapshot

MIB = 1 << 20
TORCH = "/venv/lib/python3.12/site-packages/torch"


def test_autocast_casts_let_go_at_the_block_exit_are_not_cycles(tmp_path):
    forward = [{"filename": f"{TORCH}/nn/modules/linear.py", "line": 125, "name": "forward"},
               {"filename": f"{TORCH}/nn/modules/module.py", "line": 1775, "name": "_call_impl"},
               frame(30, "train")]
    exit_ = [{"filename": f"{TORCH}/amp/autocast_mode.py", "line": 380, "name": "__exit__"}, frame(29, "train")]
    backward = [frame(33, "train")]
    trace, addr = [], 0x7F0000000000
    for _step in range(6):
        casts = []
        for _ in range(10):  # the weights cast to half, cached for the forward
            trace.append({"action": "alloc", "addr": addr, "size": 4 * MIB, "frames": forward})
            casts.append(addr)
            addr += 4 * MIB
        acts = []
        for _ in range(2):  # activations saved for backward, made after the casts
            trace.append({"action": "alloc", "addr": addr, "size": 8 * MIB, "frames": forward})
            acts.append(addr)
            addr += 8 * MIB
        for a in casts:  # autocast exits: its cache is cleared
            trace += [{"action": k, "addr": a, "size": 4 * MIB, "frames": exit_}
                      for k in ("free_requested", "free_completed")]
        trace.append({"action": "alloc", "addr": addr, "size": MIB, "frames": backward})
        addr += MIB
        for a in acts:
            trace += [{"action": k, "addr": a, "size": 8 * MIB, "frames": backward}
                      for k in ("free_requested", "free_completed")]
    snap = open_snapshot(write_snapshot(tmp_path / "autocast.pickle", [], trace))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict != "cycles", [e.text for e in report.evidence]
    assert not report.bursts


def test_a_burst_is_named_by_the_line_that_freed_most(tmp_path):
    # One stray 1 MiB free at line 50, then 4 GiB let go at line 60, back to back.
    trace, addr = [], 0x7F0000000000
    sizes = [MIB] + [512 * MIB] * 8 + [MIB] * 3
    for size in sizes:
        trace.append({"action": "alloc", "addr": addr, "size": size, "frames": [frame(10, "make")]})
        addr += size
    addr = 0x7F0000000000
    for k, size in enumerate(sizes):
        where = [frame(50 if k == 0 else 60 if size > MIB else 70, "drop")]
        trace += [{"action": a, "addr": addr, "size": size, "frames": where} for a in ("free_requested",
                                                                                      "free_completed")]
        addr += size
    snap = open_snapshot(write_snapshot(tmp_path / "burst.pickle", [], trace))
    report = find_cycles(snap, snap.devices[0])
    (burst,) = report.bursts + report.other_bursts
    assert burst.collected_at.startswith("/home/u/train.py:60")


def test_the_collector_freeing_a_few_tensors_at_a_time_is_seen_outside_bursts(tmp_path):
    # Small cycles: each collection frees two tensors, never a burst; with C++ frames the
    # collector is on those frees' stacks, so the answer is cycles, not "no burst".
    collector = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
                 {"filename": "??", "line": 0, "name": "THPVariable_clear"},
                 {"filename": "??", "line": 0, "name": "gc_collect_main"}, frame(27, "train")]
    made = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"}, frame(31, "train")]
    trace, addr = [], 0x7F0000000000
    for _ in range(6):
        pair = []
        for _ in range(2):
            trace.append({"action": "alloc", "addr": addr, "size": 8 * MIB, "frames": made})
            pair.append(addr)
            addr += 8 * MIB
        for a in pair:
            trace += [{"action": k, "addr": a, "size": 8 * MIB, "frames": collector}
                      for k in ("free_requested", "free_completed")]
    snap = open_snapshot(write_snapshot(tmp_path / "small_cycles.pickle", [], trace))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cycles" and report.confidence == "high", [e.text for e in report.evidence]
    assert "outside any burst" in report.evidence[0].text


def test_library_frees_over_two_steps_are_not_called_cycles():
    # Two real recordings (Python stacks): autocast's exit in an EfficientNet's mixed-precision
    # loop, and pack_padded_sequence letting go of the previous batch's pieces. Each burst
    # leaves the site's newest allocation alive, over two steps, inside torch's own code: a
    # library keeping what it made frees so, as the collector would. Neither is "cycles".
    from tests.conftest import SAMPLES

    for name in ("effnet_amp_autocast_py", "lstm_packed_varlen"):
        snap = open_snapshot(str(SAMPLES / "heldout" / f"{name}.pickle.xz"))
        report = find_cycles(snap, snap.devices[0])
        assert not report.to_json()["cycles_suspected"], (name, report.verdict, report.confidence)
        assert report.verdict != "cycles", name
