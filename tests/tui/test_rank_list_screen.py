"""The ranks screens: thousands of ranks from summaries alone; Enter opens a rank's snapshot."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memtui.tui.app import MemtuiApp
from memtui.tui.ranks_app import RanksApp
from memtui.tui.screens.main import MainScreen
from memtui.tui.screens.rank_list import RankListScreen
from memtui.tui.screens.ranks_report import RanksReportScreen
from tests.conftest import ROOT, SAMPLES
from tests.tui.test_analysis_screens import SIZE, report_text, wait_for
from tests.unit.analysis.rank_sets import rank_set

DDP = SAMPLES / "ranks"
RANKS = 4096


def ddp_file(rank: int) -> str:
    path = DDP / f"ddp_train.rank{rank}.pickle.xz"
    if not path.exists():
        pytest.skip(f"sample rank file not available: {path}")
    return str(path)


def fake_summaries(n: int, path: str, odd: int) -> list[dict]:
    """``n`` ranks' summaries that all point at one real file; rank ``odd`` ran out of memory."""
    gib = 1 << 30
    out = []
    for rank in range(n):
        peak = (20 + rank % 7 / 10) * gib + (8 * gib if rank == odd else 0)
        out.append({"version": 1, "file": path, "rank": rank, "error": None, "device": 0, "events": 1000 + rank,
                    "peak_allocated": int(peak), "peak_reserved": int(peak) + gib, "allocated": gib,
                    "reserved": 2 * gib, "ooms": [{"index": 3, "requested": gib, "device_free": 0}] if rank == odd
                    else [], "sites_at_peak": {"train.py:10 forward": int(peak)}, "sites_at_end": {}})
    return out


async def test_thousands_of_ranks_open_in_seconds_and_enter_opens_a_rank():
    path = ddp_file(0)
    summaries = fake_summaries(RANKS, path, odd=1234)
    progress_seen = []

    def summarize(progress):
        progress(RANKS, RANKS, 0)
        progress_seen.append(True)
        return summaries

    app = RanksApp(summarize)
    async with app.run_test(size=SIZE) as pilot:
        start = time.monotonic()
        await wait_for(pilot, lambda: isinstance(app.screen, RankListScreen) and app.screen.result is not None,
                       "the rank list")
        assert time.monotonic() - start < 10
        screen = app.screen
        assert screen.query_one("#analysis-table").row_count == RANKS
        report = report_text(screen)
        assert "peak allocated over 4,096 ranks" in report and "1 rank (1234)" in report

        screen.query_one("#analysis-table").move_cursor(row=1234)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the rank's snapshot")
        assert os.path.samefile(app.screen.snapshot.source_path, path)
        await pilot.press("q")  # back to the list, not out of the app
        await wait_for(pilot, lambda: app.screen is screen, "the rank list again")
        await pilot.press("escape")
    assert app.return_code == 0 and progress_seen


async def test_a_rank_that_cannot_be_opened_keeps_the_list(tmp_path):
    broken = tmp_path / "job.rank1.pickle"
    broken.write_bytes(b"not a snapshot")
    summaries = fake_summaries(3, str(broken), odd=1)
    app = RanksApp(lambda progress: summaries)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RankListScreen) and app.screen.result is not None,
                       "the rank list")
        screen = app.screen
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen and not app.loading, "the failed load")
        assert app.is_running


async def test_enter_on_another_rank_in_the_explorer_opens_it():
    rank0, rank1 = ddp_file(0), ddp_file(1)
    app = MemtuiApp(rank0, show_source=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, RanksReportScreen) and app.screen.result is not None,
                       "the ranks")
        app.screen.query_one("#analysis-table").move_cursor(row=1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen) and app.screen.snapshot.source_path != rank0,
                       "rank 1 in the explorer")
        assert os.path.samefile(app.screen.snapshot.source_path, rank1)
        assert len(app.screen_stack) == 2  # in place of rank 0, not over it


WORKERS_IN_THE_UI = """
import asyncio, sys
from memtui.fleet.rank_files import summarize_files
from memtui.fleet.runners import local_runner
from memtui.tui.ranks_app import RanksApp
from memtui.tui.screens.rank_list import RankListScreen

async def main(files):
    runner = local_runner(2)
    app = RanksApp(lambda progress: summarize_files(files, progress=progress, runner=runner))
    async with app.run_test(size=(140, 44)) as pilot:
        for _ in range(600):
            if isinstance(app.screen, RankListScreen) and app.screen.result is not None:
                break
            await pilot.pause(0.05)
        print(app.screen.result["result"]["outliers"][0]["rank"], app.screen.result["result"]["failed"])
    runner.close()

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
"""


def test_worker_processes_start_inside_the_terminal_ui(tmp_path):
    # A fresh interpreter: multiprocessing starts its helper process once, and inside the UI
    # sys.stderr has no descriptor to give it.
    files = rank_set(tmp_path / "job", ranks=3, different=1)
    script = tmp_path / "workers_in_the_ui.py"
    script.write_text(WORKERS_IN_THE_UI)
    done = subprocess.run([sys.executable, str(script), *files], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.stdout.split() == ["1", "[]"], done.stderr[-2000:]
