"""The analysis commands on every sample and shared snapshot, text and --json, in process."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from memtui.analysis.cycles import find_cycles
from memtui.analysis.leaks import find_leaks
from memtui.analysis.ranks import summarize_snapshot
from memtui.cli import main
from memtui.commands import _common
from tests.conftest import SAMPLES, SHARED, sample_files, shared_params
from tests.conftest import SHARED as SHARED_DIR
from tests.fixtures.opened import cached

NEEDS_SHARED = pytest.mark.skipif(not SHARED_DIR.is_dir(), reason=f"no real snapshots at {SHARED_DIR}")

SINGLE_FILE_COMMANDS = ["oom", "leaks", "cycles"]


def every_file():
    params = shared_params("*.pickle")
    params += [pytest.param(p, id=f"sample-{p.relative_to(p.parents[1])}") for p in sample_files()]
    return params


@pytest.fixture(autouse=True)
def open_each_file_once(monkeypatch):
    """The commands' own code runs; only the opening of a file is shared between tests."""
    monkeypatch.setattr(_common, "load", lambda path, cache: cached(str(path)))


def run(args: list[str], capsys) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", every_file())
def test_every_analysis_on_every_file(path, capsys):
    for command in SINGLE_FILE_COMMANDS:
        assert run([command, str(path)], capsys).strip()
        parsed = json.loads(run([command, str(path), "--json"], capsys))
        # Every command names the device it looked at: the snapshot's default one.
        assert parsed["device"] == cached(str(path)).default_device()
        if command == "oom":
            for entry in parsed["ooms"]:
                assert {"device", "index", "requested", "device_free", "reserved", "allocated",
                        "largest_free_block", "verdict", "confidence", "evidence", "alternatives", "limit",
                        "process_limit", "top_sites"} <= set(entry)
                assert entry["verdict"] in ("fragmentation", "capacity", "process_cap", "external")
                assert entry["device"] == parsed["device"] and entry["evidence"]
        elif command == "cycles":
            assert {"cycles_suspected", "verdict", "confidence", "evidence", "alternatives", "sites",
                    "bursts"} <= set(parsed)
            assert parsed["confidence"] in ("high", "medium", "low") and parsed["evidence"]
        else:
            assert {"device", "verdict", "confidence", "evidence", "sites", "steps", "growing"} <= set(parsed)
            assert parsed["evidence"]
    assert "A: " in run(["diff", str(path), str(path)], capsys)
    assert json.loads(run(["diff", str(path), str(path), "--json"], capsys))["new"] == []


@pytest.mark.shared
@NEEDS_SHARED
def test_oom_text_and_json_agree(capsys):
    path = str(SHARED / "oom_training.pickle")
    text = run(["oom", path], capsys)
    parsed = json.loads(run(["oom", path, "--json"], capsys))
    (entry,) = parsed["ooms"]
    # The batch doubled under a 6 GiB cap: the request outgrew what the cap left.
    assert parsed["device"] == 0 and entry["verdict"] == "process_cap" and entry["process_limit"] is True
    assert "per-process cap" in text and "verdict: process_cap" in text and "because:" in text


@pytest.mark.shared
@NEEDS_SHARED
def test_leaks_text_names_the_line(capsys):
    text = run(["leaks", str(SHARED / "leak_loss_history.pickle")], capsys)
    growing = text.split("growing call sites")[1].split("\n\n")[0]
    assert "gen_snapshots.py:123" in growing and "+512 B/step" in growing


@pytest.mark.shared
@NEEDS_SHARED
def test_diff_between_events_and_bad_event(capsys):
    path = str(SHARED / "refcycle_gc_interval.pickle")
    out = json.loads(run(["diff", path, path, "--at-a", "83", "--at-b", "163", "--json"], capsys))
    assert out["delta_allocated"] == -(640 << 20)
    assert main(["diff", path, path, "--at-a", "999999"]) == 2
    assert "--at-a 999999: no event 999,999" in capsys.readouterr().err


@pytest.mark.shared
@NEEDS_SHARED
def test_ranks_command(tmp_path, capsys):
    for rank in (0, 1, 2):
        shutil.copy(SHARED / "train_linear_adam.pickle", tmp_path / f"r.rank{rank}.pickle")
    shutil.copy(SHARED / "refcycle_simple.pickle", tmp_path / "r.rank3.pickle")
    text = run(["ranks", str(tmp_path), "--workers", "1"], capsys)
    assert "outlier: rank 3" in text
    out = json.loads(run(["ranks", *sorted(map(str, tmp_path.iterdir())), "--workers", "1", "--json"], capsys))
    assert [o["rank"] for o in out["outliers"]] == [3]
    assert main(["ranks", str(tmp_path / "missing.pickle")]) == 2


def test_ranks_on_sample_rank_sets(capsys):
    dirs = sorted({p.parent for p in sample_files() if "rank" in p.parent.name})
    if not dirs:
        pytest.skip("no sample rank sets")
    for d in dirs:
        out = json.loads(run(["ranks", str(d), "--workers", "1", "--json"], capsys))
        assert out["ranks"] and not out["failed"]


def test_bad_depth(capsys):
    files = sample_files() or [p for p in (SHARED / "train_linear_adam.pickle",) if p.exists()]
    if not files:
        pytest.skip("no snapshot")
    assert main(["leaks", str(files[0]), "--depth", "0"]) == 2
    assert "--depth" in capsys.readouterr().err


@pytest.mark.shared
def test_analyses_are_fast_on_a_million_events(big_trace):
    snap = cached(str(big_trace))
    dev = snap.devices[0]
    # Processor seconds, not wall time: a guard against an analysis turning quadratic that holds
    # on a loaded machine too (speed itself is measured in benchmarks/).
    timings = {}
    for name, analysis in (("leaks", lambda: find_leaks(snap, dev)), ("cycles", lambda: find_cycles(snap, dev)),
                           ("ranks", lambda: summarize_snapshot(snap))):
        start = time.process_time()
        result = analysis()
        timings[name] = time.process_time() - start
        if name == "cycles":
            assert not result.suspected
        if name == "leaks":
            assert result.growing == []
    assert max(timings.values()) < 3.0, timings


@pytest.mark.shared
@NEEDS_SHARED
def test_diff_tui_flag_opens_the_diff_screen(monkeypatch, capsys):
    import memtui.tui.diff_app as diff_app

    shown = []
    monkeypatch.setattr(diff_app, "run_diff_app", lambda result, **_: shown.append(result) or 0)
    path = str(SHARED / "train_linear_adam.pickle")
    assert main(["diff", path, path, "--tui"]) == 0
    assert len(shown) == 1 and capsys.readouterr().out == ""
    assert main(["diff", path, path, "--tui", "--json"]) == 2


def test_diff_takes_the_moments_breakdown_takes(capsys):
    # --at-a/--at-b read a moment as breakdown --at does (memtui/analysis/moments.py): peak,
    # end, oom, step:N or an event number, and refuse anything else in one line naming the flag.
    path = str(SAMPLES / "oom_training.pickle.xz")
    for word in ("oom", "peak", "end", "step:last"):
        moment = json.loads(run(["breakdown", path, "--at", word, "--json"], capsys))["at"]["event"]
        by_word = json.loads(run(["diff", path, path, "--at-a", word, "--json"], capsys))
        by_number = json.loads(run(["diff", path, path, "--at-a", str(moment), "--json"], capsys))
        assert by_word["a"]["index"] == moment, word
        named = by_word["a"].pop("name")
        assert named.endswith(f"(event {moment})") and by_number["a"].pop("name").endswith(f"@ event {moment}"), named
        assert by_word == by_number, word
    assert main(["diff", path, path, "--at-b", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--at-b nonsense: say peak, end, oom" in err
