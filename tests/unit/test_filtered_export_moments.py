"""A filtered export holds part of the recording's trace and is not replayed: every view
numbers its events as the source does, and none shows a figure at a moment the file does
not hold. It says so, or refuses the moment in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtui.cli import main

SOURCE = Path(__file__).resolve().parents[2] / "sample_snapshots" / "oom_training.pickle.xz"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("filtered") / "big_only.msgpack"
    assert main(["--no-cache", "export", str(SOURCE), "--filter", "size>100MiB", "-o", str(out)]) == 0
    return out


def _json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["--no-cache", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _source_ooms(capsys) -> list[int]:
    return [o["index"] for o in _json(capsys, "info", str(SOURCE))["devices"][0]["trace"]["ooms"]]


def test_every_view_numbers_the_exports_oom_as_the_source_does(exported, capsys):
    source_ooms = _source_ooms(capsys)
    assert source_ooms
    info = _json(capsys, "info", str(exported))
    assert [o["index"] for o in info["devices"][0]["trace"]["ooms"]] == source_ooms
    events = _json(capsys, "events", str(exported), "--filter", "action:oom", "--limit", "0")
    assert [e["index"] for e in events] == source_ooms


def test_oom_says_it_cannot_tell_why_rather_than_explain_the_end(exported, capsys):
    result = _json(capsys, "oom", str(exported))
    assert result["ooms"] == []
    assert result["not_replayed"]["events"] == _source_ooms(capsys)
    capsys.readouterr()
    assert main(["--no-cache", "oom", str(exported)]) == 0
    text = capsys.readouterr().out
    assert "cannot tell why" in text and "not replayed" in text


def test_breakdown_is_the_files_own_state_and_says_so(exported, capsys):
    for at in ("peak", "end"):
        result = _json(capsys, "breakdown", str(exported), "--at", at)
        assert result["at"] == {"event": -1, "moment": "end"}
    info = _json(capsys, "info", str(exported))["devices"][0]
    assert result["allocated"] == info["allocated"] and result["reserved"] == info["reserved"]
    capsys.readouterr()
    assert main(["--no-cache", "breakdown", str(exported)]) == 0
    assert "the source's end (a filtered export is not replayed)" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("argv", [
    ["breakdown", "{export}", "--at", "294"],
    ["breakdown", "{export}", "--at", "oom"],
    ["diff", "{source}", "{export}", "--at-b", "294"],
])
def test_a_moment_a_filtered_export_does_not_hold_is_refused_in_one_line(exported, capsys, argv):
    capsys.readouterr()
    argv = [a.format(export=exported, source=SOURCE) for a in argv]
    assert main(["--no-cache", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not replayed" in err


def test_the_agents_explain_oom_says_the_same(exported, capsys):
    from memtui.mcp import tools
    from memtui.mcp.store import SnapshotStore
    from memtui.services.catalog import spec

    store = SnapshotStore([str(exported.parent)], cache=None)
    answer = tools.answer(store, spec("oom"), {"path": str(exported)})
    assert answer.data["ooms"] == [] and answer.data["not_replayed"]["events"] == _source_ooms(capsys)
    assert "cannot tell why" in answer.summary and "\n" not in answer.summary


@pytest.mark.parametrize("argv", [
    ["leaks", "{export}"],
    ["cycles", "{export}"],
    ["breakdown", "{export}", "--steps"],
])
def test_an_analysis_over_time_is_refused_on_a_filtered_export(exported, capsys, argv):
    capsys.readouterr()
    assert main(["--no-cache", *[a.format(export=exported) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not replayed" in err and "run it on the source snapshot" in err


def test_stack_numbers_an_allocations_events_as_the_source_does(exported, capsys):
    address_n = _json(capsys, "top", str(exported), "-n", "1")[0]["address_n"]  # live at the end: in the export
    in_source = _json(capsys, "stack", str(SOURCE), address_n)["events"]["alloc"]["index"]
    in_export = _json(capsys, "stack", str(exported), address_n)["events"]["alloc"]["index"]
    events = _json(capsys, "events", str(exported), "--filter", f"id:{address_n}", "--limit", "0")
    assert in_export == in_source == events[0]["index"] and in_source > 100  # a row of the export would be smaller


def test_pages_of_an_exports_events_start_and_chain_by_the_source_numbers(exported, capsys):
    every = [e["index"] for e in _json(capsys, "events", str(exported), "--limit", "0")]
    assert every != list(range(len(every)))  # the export left events out
    middle = every[len(every) // 2]
    page = [e["index"] for e in _json(capsys, "events", str(exported), "--start", str(middle), "--limit", "3")]
    assert page == every[len(every) // 2:len(every) // 2 + 3]
    gap = middle - 1 if middle - 1 not in every else None  # a number the export left out: the next one after it
    if gap is not None:
        assert _json(capsys, "events", str(exported), "--start", str(gap), "--limit", "1")[0]["index"] == middle
    capsys.readouterr()
    assert main(["--no-cache", "events", str(exported), "--start", str(middle), "--limit", "3"]) == 0
    follow = capsys.readouterr().out.splitlines()[-1]
    assert follow == f"(more: --start {every[len(every) // 2 + 3]})"


def test_a_rank_summary_of_a_filtered_export_has_no_peak_of_its_own(exported):
    from memtui.analysis.ranks import summarize_snapshot
    from memtui.open import open_snapshot

    summary = summarize_snapshot(open_snapshot(str(exported)))
    source = summarize_snapshot(open_snapshot(str(SOURCE)))
    assert summary["peak_index"] == -1 and summary["peak_allocated"] == summary["allocated"]
    assert [o["index"] for o in summary["ooms"]] == [o["index"] for o in source["ooms"]]


@pytest.fixture(scope="module")
def alloc_filtered_out(tmp_path_factory) -> Path:
    # Only the frees of big blocks: the live blocks' allocs are all left out of the file.
    out = tmp_path_factory.mktemp("frees") / "frees_only.msgpack"
    assert main(["--no-cache", "export", str(SOURCE), "--filter", "action:free_completed", "-o", str(out)]) == 0
    return out


def test_a_block_whose_alloc_the_filter_left_out_is_no_ghost_and_is_said_so(alloc_filtered_out, capsys):
    from memtui.model.segments import ALLOCATED, PENDING_FREE
    from memtui.model.snapshot import ALLOC_LEFT_OUT
    from memtui.open import open_snapshot

    dev = open_snapshot(alloc_filtered_out, cache=None).devices[0]
    live = int(((dev.blocks.state == ALLOCATED) | (dev.blocks.state == PENDING_FREE)).sum())
    assert live and dev.partial_trace
    assert _json(capsys, "info", str(alloc_filtered_out))["devices"][0]["ghost_blocks"] == 0
    capsys.readouterr()
    main(["--no-cache", "check", str(alloc_filtered_out)])
    out = capsys.readouterr().out
    assert "before the trace starts" not in out and ALLOC_LEFT_OUT in out, out
    assert dev.alloc_not_in_trace() == ALLOC_LEFT_OUT
