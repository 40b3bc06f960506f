"""Rank summaries at scale: the same whichever way computed, cached, failures kept apart, Dask optional."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.analysis.rank_overview import group_outliers, peak_histogram
from memtui.analysis.ranks import compare_ranks
from memtui.cache.summaries import SummaryCache
from memtui.cli import main
from memtui.fleet.rank_files import find_rank_files, summarize_files
from memtui.fleet.runners import InProcessRunner
from memtui.fleet.task import rank_summary
from memtui.report.ranks import rank_ranges
from tests.conftest import ROOT, SAMPLES
from tests.unit.analysis.rank_sets import EXTRA_LINE, rank_set, rank_snapshot

DDP = SAMPLES / "ranks"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> list[str]:
    return rank_set(tmp_path_factory.mktemp("ranks"))


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of two worker processes, started once: it takes a few seconds."""
    pytest.importorskip("distributed")
    from memtui.fleet.dask_runner import DaskRunner

    runner = DaskRunner("local:2")
    runner.connect()
    yield runner
    runner.close()


class CountingRunner(InProcessRunner):
    """Runs in process and remembers which files it was given."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def map_unordered(self, fn, items):
        self.given += list(items)
        return super().map_unordered(fn, items)


def ddp_files() -> list[str]:
    files = find_rank_files([str(DDP)]) if DDP.is_dir() else []
    if len(files) < 2:
        pytest.skip("no sample DDP rank files")
    return files


def test_summaries_are_equal_in_process_in_a_pool_on_a_cluster_and_from_the_cache(generated, cluster, tmp_path):
    files = generated + ddp_files()
    in_process = [rank_summary(f) for f in files]
    assert all(s["error"] is None for s in in_process)
    assert summarize_files(files, workers=2) == in_process
    assert summarize_files(files, runner=cluster) == in_process
    cache = SummaryCache(str(tmp_path))
    assert summarize_files(files, workers=1, cache=cache) == in_process
    assert summarize_files(files, runner=CountingRunner(), cache=cache) == in_process
    assert cache.hits == len(files)


def test_cached_summaries_are_reused_and_a_changed_file_is_summarised_again(tmp_path):
    files = rank_set(tmp_path / "job")
    cache = SummaryCache(str(tmp_path / "cache"))
    first = CountingRunner()
    summaries = summarize_files(files, runner=first, cache=cache)
    assert first.given == files and cache.written == len(files)
    again = CountingRunner()
    assert summarize_files(files, runner=again, cache=cache) == summaries
    assert again.given == []  # a second run reads summaries only

    rank_snapshot(Path(files[2]), 2, extra=512 << 20)  # rank 2 rewritten
    changed = CountingRunner()
    after = summarize_files(files, runner=changed, cache=cache)
    assert changed.given == [files[2]]
    assert after[2]["peak_allocated"] > summaries[2]["peak_allocated"] and after[:2] == summaries[:2]


def test_a_cached_summary_names_the_file_it_was_asked_for(tmp_path):
    files = rank_set(tmp_path / "a", ranks=1)
    cache = SummaryCache(str(tmp_path / "cache"))
    summarize_files(files, workers=1, cache=cache)
    copy = tmp_path / "b" / "other.rank7.pickle"
    copy.parent.mkdir()
    copy.write_bytes(Path(files[0]).read_bytes())
    os.utime(copy, ns=(os.stat(files[0]).st_atime_ns, os.stat(files[0]).st_mtime_ns))  # same key
    (found,) = summarize_files([str(copy)], runner=CountingRunner(), cache=cache)
    assert cache.hits == 1 and found["file"] == str(copy) and found["rank"] == 7


def test_a_damaged_cache_entry_is_computed_again(tmp_path):
    files = rank_set(tmp_path / "job", ranks=2)
    cache = SummaryCache(str(tmp_path / "cache"))
    good = summarize_files(files, workers=1, cache=cache)
    for name in os.listdir(cache.folder):
        (Path(cache.folder) / name).write_bytes(b"\x93 not msgpack")
    runner = CountingRunner()
    assert summarize_files(files, runner=runner, cache=cache) == good and runner.given == files


@pytest.mark.parametrize("where", ["pool", "cluster"])
def test_a_corrupt_file_among_good_ones_is_reported_and_the_rest_succeed(generated, tmp_path, where, request):
    corrupt = tmp_path / "job.rank9.pickle"
    corrupt.write_bytes(b"\x80\x04 this is not a snapshot")
    missing = str(tmp_path / "job.rank10.pickle")
    files = generated + [str(corrupt), missing]
    runner = request.getfixturevalue("cluster") if where == "cluster" else None
    seen = []
    summaries = summarize_files(files, workers=2, runner=runner, cache=SummaryCache(str(tmp_path / "cache")),
                                progress=lambda done, total, failed: seen.append((done, total, failed)))
    assert [s["error"] is None for s in summaries] == [True] * len(generated) + [False, False]
    assert summaries[-2]["error"] and "job.rank9.pickle" in summaries[-2]["error"]
    assert "No such file" in summaries[-1]["error"]
    assert seen[-1] == (len(files), len(files), 2)
    result = compare_ranks(summaries)
    assert [o["rank"] for o in result["outliers"]] == [4]
    assert [f["file"] for f in result["failed"]] == [str(corrupt), missing]


def test_a_worker_that_raises_is_one_failed_file(generated):
    class Exploding(InProcessRunner):
        def map_unordered(self, fn, items):
            for i, outcome in super().map_unordered(fn, items):
                yield i, MemoryError("killed") if i == 1 else outcome

    summaries = summarize_files(generated, runner=Exploding())
    assert summaries[1]["error"] == "worker failed: MemoryError: killed"
    assert sum(bool(s["error"]) for s in summaries) == 1


def ranks_json(capsys, *args: str) -> dict:
    assert main(["ranks", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ranks_flags_the_different_rank_of_a_generated_set(generated, capsys):
    result = ranks_json(capsys, str(Path(generated[0]).parent))
    assert [o["rank"] for o in result["outliers"]] == [4]
    (group,) = result["outlier_groups"]
    assert group["ranks"] == [4] and group["peak"] == "higher"
    assert any(s["site"].endswith(f":{EXTRA_LINE} stash") and s["direction"] == "more" for s in group["sites"])
    assert sum(b["count"] for b in result["histogram"]) == 6 and result["histogram"][-1]["outliers"] == [4]


def test_ranks_flags_the_different_ddp_rank(capsys):
    ddp_files()
    result = ranks_json(capsys, str(DDP), "--workers", "1")
    assert [o["rank"] for o in result["outliers"]] == [1]
    assert result["outlier_groups"][0]["ranks"] == [1]


def test_ranks_text_has_the_table_histogram_and_groups(generated, capsys, tmp_path):
    corrupt = tmp_path / "job.rank9.pickle"
    corrupt.write_bytes(b"garbage")
    assert main(["ranks", *generated, str(corrupt), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "<- outlier" in out and "failed: " in out and "job.rank9.pickle" in out
    assert "peak allocated over 6 ranks:" in out and "█" in out
    assert "1 rank (4): peak allocated higher" in out


def test_ranks_on_a_scheduler_named_in_the_environment(generated, cluster, capsys, monkeypatch):
    monkeypatch.setenv("MEMTUI_DASK_SCHEDULER", cluster.scheduler_address)
    result = ranks_json(capsys, *generated, "--no-cache")
    assert [o["rank"] for o in result["outliers"]] == [4]


def test_without_dask_cluster_says_what_to_install(generated, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    assert main(["ranks", *generated, "--cluster", "local:2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'memtui[cluster]'" in err and err.count("\n") == 1


def test_cluster_and_worker_options_are_checked(generated, capsys):
    assert main(["ranks", *generated, "--cluster", "local:x"]) == 2
    assert main(["ranks", *generated, "--cluster", "local:2", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "local:4" in err and "--workers" in err


def test_nothing_but_the_dask_runner_imports_dask():
    code = ("import sys, memtui.cli, memtui.commands.ranks, memtui.fleet.collect, memtui.tui.ranks_app\n"
            "memtui.cli.command_modules()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_outlier_groups_gather_ranks_that_differ_alike():
    def summary(rank: int, peak: int, sites: dict, ooms: int = 0) -> dict:
        return {"file": f"r{rank}", "rank": rank, "error": None, "device": 0, "events": 10, "peak_allocated": peak,
                "peak_reserved": peak, "allocated": 0, "reserved": 0, "ooms": [{}] * ooms,
                "sites_at_peak": sites, "sites_at_end": {}}

    gib = 1 << 30
    normal = [summary(r, 10 * gib, {"a": 10 * gib}) for r in range(40)]
    normal[7] = summary(7, 14 * gib, {"a": 10 * gib, "b": 4 * gib}, ooms=1)
    normal[21] = summary(21, 14 * gib, {"a": 10 * gib, "b": 4 * gib}, ooms=1)
    normal[30] = summary(30, 6 * gib, {"a": 6 * gib})
    result = compare_ranks(normal)
    groups = group_outliers(result)
    assert [g["ranks"] for g in groups] == [[7, 21], [30]]
    assert groups[0]["oom"] and groups[0]["peak"] == "higher" and "ran out of memory" in groups[0]["difference"]
    assert groups[1]["peak"] == "lower" and groups[1]["sites"][0]["direction"] == "less"
    histogram = peak_histogram(result)
    assert sum(b["count"] for b in histogram) == 40
    assert histogram[0]["outliers"] == [30] and histogram[-1]["outliers"] == [7, 21]
    assert rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_the_summary_cache_keeps_the_most_recently_used_and_turns_off_when_unwritable(tmp_path):
    files = rank_set(tmp_path / "job", ranks=4)
    cache = SummaryCache(str(tmp_path / "cache"))
    summarize_files(files, workers=1, cache=cache)
    assert cache.prune(keep=2) == 2 and len(os.listdir(cache.folder)) == 2

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    warnings = []
    unwritable = SummaryCache(str(blocked), warn=warnings.append)  # its folder cannot be made
    assert summarize_files(files, workers=1, cache=unwritable) == summarize_files(files, workers=1)
    assert unwritable.disabled and len(warnings) == 1 and "summary cache off" in warnings[0]


def test_no_readable_rank_file_is_one_line_on_stderr_and_nothing_on_stdout(tmp_path, capsys):
    for name in ("rank0.pickle", "rank1.pickle"):
        (tmp_path / name).write_text("not a snapshot\n")
    assert main(["--no-cache", "ranks", str(tmp_path / "rank0.pickle"), str(tmp_path / "rank1.pickle"),
                 "--workers", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("memtui: no rank file could be read (rank0.pickle: ") and err.endswith("; and 1 more)\n")


def test_no_readable_rank_file_with_json_still_lists_why(tmp_path, capsys):
    (tmp_path / "rank0.pickle").write_text("not a snapshot\n")
    assert main(["--no-cache", "ranks", str(tmp_path / "rank0.pickle"), "--workers", "1", "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["failed"][0]["file"].endswith("rank0.pickle") and err.count("\n") == 1
