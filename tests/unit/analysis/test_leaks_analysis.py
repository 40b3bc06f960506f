"""Growth by call site: the leak file names the forward line; plain loops show no growth."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.analysis.callsites import CallSites
from memtui.analysis.leaks import find_leaks, growing_sites
from memtui.analysis.live import allocated_curve
from tests.conftest import SHARED, truth_for
from tests.fixtures.opened import shared


@pytest.mark.shared
def test_leak_points_at_the_forward_line():
    snap = shared("leak_loss_history")
    report = find_leaks(snap, snap.devices[0])
    assert report.points.kind == "annotation" and report.points.steps == 20
    (site,) = report.growing
    # loss = model(x).mean(): the line whose allocations happen inside the modules' forward.
    assert site.frames[0]["line"] == 123 and site.frames[0]["name"] == "w_leak_loss_history"
    sites = CallSites(snap.stacks)
    dev = snap.devices[0]
    stacks = np.unique(dev.trace.stack[dev.trace.stack >= 0])
    on_line = [s for s in stacks if sites.label(sites.of_stack(int(s))) == site.label]
    inner = {snap.stacks.frames.filename_of(int(f)) for s in on_line for f in snap.stacks.frame_ids(int(s))}
    assert any(name.endswith("torch/nn/modules/transformer.py") for name in inner)
    # One 512-byte loss tensor kept per step, as the recorded allocated_per_step shows.
    assert site.growth_per_unit == 512 and site.to_json()["growth_per_step"] == 512
    truth = truth_for(SHARED / "leak_loss_history.pickle")["allocated_per_step"]
    assert (truth[-1] - truth[1]) // (len(truth) - 2) == 512


@pytest.mark.shared
@pytest.mark.parametrize("name", ["train_linear_adam", "long_run_wrap", "expandable_segments", "refcycle_gc_interval"])
def test_no_growth_in_steady_loops(name):
    snap = shared(name)
    assert find_leaks(snap, snap.devices[0]).growing == []


@pytest.mark.shared
def test_repeated_line_without_annotations():
    snap = shared("multistream")
    report = find_leaks(snap, snap.devices[0])
    assert report.points.kind == "iterations" and report.points.name.endswith("w_multistream")


@pytest.mark.shared
def test_time_windows_without_annotations_or_stacks():
    snap = shared("context_none")
    report = find_leaks(snap, snap.devices[0], windows=5)
    assert report.points.kind == "time" and 1 <= len(report.points) <= 5


@pytest.mark.shared
def test_live_at_end_matches_the_snapshot():
    snap = shared("leak_loss_history")
    report = find_leaks(snap, snap.devices[0], limit=None)
    assert report.live_bytes == snap.devices[0].allocated
    assert sum(s.bytes for s in report.sites) == report.live_bytes


@pytest.mark.shared
@pytest.mark.parametrize("name", ["train_linear_adam", "oom_training", "refcycle_simple", "multistream"])
def test_allocated_curve_peak_matches_memory_stats(name):
    snap = shared(name)
    stats = truth_for(SHARED / f"{name}.pickle")["memory_stats"]
    curve = allocated_curve(snap.devices[0])
    assert curve.max() == stats["allocated_bytes.all.peak"]
    assert curve[-1] == stats["allocated_bytes.all.current"]


def test_growing_rule():
    # What a row keeps (its floor: the least of each sample and every later one) must rise in
    # at least half of the intervals. A dip that later samples climb out of is a temporary
    # freed, not memory given back: [1, 2, 1, 3, 4] keeps more and more.
    series = np.array([[1, 2, 3, 4, 5], [5, 5, 9, 9, 9], [1, 2, 1, 3, 4], [4, 4, 4, 4, 4], [1, 1, 2, 2, 3],
                       [1, 3, 1, 3, 1]])
    assert growing_sites(series).tolist() == [True, False, True, False, True, False]


def test_deeper_call_sites_split_one_line(tmp_path):
    from memtui.open import open_snapshot
    from tests.fixtures.opened import frame, write_snapshot

    base = 0x7F0000000000
    helper = frame(5, "helper")
    trace = [{"action": "alloc", "addr": base + i * 512, "size": 512, "frames": [helper, frame(20 + i % 2)]}
             for i in range(4)]
    snap = open_snapshot(write_snapshot(tmp_path / "s.pickle", [], trace))
    assert len({CallSites(snap.stacks).label(CallSites(snap.stacks).of_stack(s)) for s in range(len(snap.stacks))}) == 1
    deep = CallSites(snap.stacks, depth=2)
    labels = {deep.label(deep.of_stack(s)) for s in range(len(snap.stacks))}
    assert labels == {"/home/u/train.py:5 helper <- /home/u/train.py:20 train_step",
                      "/home/u/train.py:5 helper <- /home/u/train.py:21 train_step"}
