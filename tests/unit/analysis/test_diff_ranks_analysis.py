"""Diff by call site and pool; rank summaries and the outlier rank."""

from __future__ import annotations

import json
import shutil

import msgpack
import pytest

from memtui.analysis.diff import diff_views, view_at_end, view_at_event
from memtui.analysis.ranks import compare_ranks, rank_from_name
from memtui.errors import UsageError
from memtui.fleet.rank_files import find_rank_files, summarize_files
from memtui.fleet.task import rank_summary
from tests.conftest import SHARED
from tests.conftest import SHARED as SHARED_DIR
from tests.fixtures.opened import shared

NEEDS_SHARED = pytest.mark.skipif(not SHARED_DIR.is_dir(), reason=f"no real snapshots at {SHARED_DIR}")


@pytest.mark.shared
def test_diff_of_a_snapshot_with_itself_is_empty():
    snap = shared("train_linear_adam")
    d = diff_views(view_at_end(snap, snap.devices[0]), view_at_end(snap, snap.devices[0]))
    assert d.new == [] and d.gone == [] and all(s.status == "same" for s in d.sites)
    assert all(p.a == p.b for p in d.pools)


@pytest.mark.shared
def test_diff_between_two_files_lists_new_and_gone_sites_by_growth():
    a, b = shared("train_linear_adam"), shared("leak_loss_history")
    d = diff_views(view_at_end(a, a.devices[0]), view_at_end(b, b.devices[0]))
    j = d.to_json()
    deltas = [s["delta_bytes"] for s in j["sites"]]
    assert deltas == sorted(deltas, reverse=True)
    assert j["new"] and j["gone"] and not set(j["new"]) & set(j["gone"])
    assert j["delta_reserved"] == b.devices[0].reserved - a.devices[0].reserved
    assert {p["pool"] for p in j["pools"]} == {"large", "small"}
    assert sum(p["reserved_b"] for p in j["pools"]) == b.devices[0].reserved


@pytest.mark.shared
def test_diff_between_two_events_of_one_trace():
    snap = shared("refcycle_gc_interval")
    dev = snap.devices[0]
    before_gc, after_gc = view_at_event(snap, dev, 83), view_at_event(snap, dev, 163)
    d = diff_views(before_gc, after_gc)
    assert before_gc.allocated - after_gc.allocated == 640 << 20
    assert d.sites[-1].delta_bytes == -(320 << 20)  # each of the two lines lost 20 tensors of 16 MiB


@pytest.mark.shared
@NEEDS_SHARED
def test_rank_summary_is_small_plain_and_stable():
    path = str(SHARED / "leak_loss_history.pickle")
    s = rank_summary(path)
    assert s["error"] is None and s["peak_allocated"] > s["allocated"]
    assert len(json.dumps(s)) < 32_000
    assert msgpack.unpackb(msgpack.packb(s), strict_map_key=False) == json.loads(json.dumps(s))
    assert rank_summary(path) == s


def test_rank_names():
    assert rank_from_name("/x/snap.rank3.pickle") == 3
    assert rank_from_name("/x/mem_rank_12.pickle.xz") == 12
    assert rank_from_name("/x/trace-7.pickle") == 7
    assert rank_from_name("/x/trace.pickle") is None


@pytest.fixture
def rank_dir(tmp_path):
    if not (SHARED / "train_linear_adam.pickle").exists():
        pytest.skip("shared snapshots not available")
    for rank in (0, 1, 3):
        shutil.copy(SHARED / "train_linear_adam.pickle", tmp_path / f"snap.rank{rank}.pickle")
    shutil.copy(SHARED / "oom_training.pickle", tmp_path / "snap.rank2.pickle")
    return tmp_path


@pytest.mark.shared
def test_the_different_rank_is_flagged(rank_dir):
    (rank_dir / "snap.rank4.pickle").write_bytes(b"not a snapshot")
    files = find_rank_files([str(rank_dir)])
    assert [rank_from_name(f) for f in files] == [0, 1, 2, 3, 4]
    summaries = summarize_files(files, workers=1)
    result = compare_ranks(summaries)
    assert [o["rank"] for o in result["outliers"]] == [2]
    assert any("OOM" in r for r in result["outliers"][0]["reasons"])
    assert {d["rank"] for d in result["divergent_sites"]} == {2}
    assert [f["file"] for f in result["failed"]] == [str(rank_dir / "snap.rank4.pickle")]
    assert [r["rank"] for r in result["ranks"]] == [0, 1, 2, 3]


@pytest.mark.shared
def test_worker_pool_gives_the_same_summaries(rank_dir):
    files = find_rank_files([str(rank_dir)])
    seen = []
    pooled = summarize_files(files, workers=2, progress=lambda done, total, failed: seen.append(done))
    assert pooled == summarize_files(files, workers=1)
    assert seen[0] == 0 and seen[-1] == len(files)


def test_two_ranks_flag_the_larger(tmp_path):
    a = {"file": "a", "rank": 0, "error": None, "device": 0, "events": 1, "peak_allocated": 100 << 20,
         "peak_reserved": 0, "allocated": 0, "reserved": 0, "ooms": [], "sites_at_peak": {"x": 100 << 20},
         "sites_at_end": {}}
    b = {**a, "file": "b", "rank": 1, "peak_allocated": 300 << 20, "sites_at_peak": {"x": 100 << 20, "y": 200 << 20}}
    result = compare_ranks([a, b])
    assert result["reference_rank"] == 0
    assert [o["rank"] for o in result["outliers"]] == [1]
    assert result["divergent_sites"][0]["site"] == "y"


def test_no_files(tmp_path):
    with pytest.raises(UsageError):
        find_rank_files([str(tmp_path)])


def test_a_side_before_the_first_event_says_so_not_event_minus_one():
    from memtui.analysis.diff import view_at_event
    from tests.conftest import SAMPLES
    from tests.fixtures.opened import cached

    snapshot = cached(str(SAMPLES / "oom_training.pickle.xz"))
    dev = snapshot.devices[0]
    assert view_at_event(snapshot, dev, -1).name.endswith("device 0 before its first event")
    assert view_at_event(snapshot, dev, 5).name.endswith("device 0 @ event 5")
