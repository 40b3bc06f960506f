"""The analysis screens in the explorer: opened by key and palette, rows jump to events."""

from __future__ import annotations

import pytest

from memtui.analysis.diff import diff_views, view_at_end
from memtui.report.cycles import cycles_report
from memtui.tui.app import MemtuiApp
from memtui.tui.diff_app import DiffApp
from memtui.tui.screens.analysis_base import AnalysisScreen
from memtui.tui.screens.main import MainScreen
from memtui.tui.screens.ranks_report import sibling_rank_files
from tests.conftest import SHARED
from tests.fixtures.opened import cached

SIZE = (140, 44)


def app_for(name: str) -> MemtuiApp:
    path = SHARED / f"{name}.pickle"
    if not path.exists():
        pytest.skip(f"snapshot not available: {path}")
    snapshot = cached(str(path))
    return MemtuiApp(lambda progress: snapshot, show_source=False)


async def wait_for(pilot, condition, what: str) -> None:
    for _ in range(500):
        if condition():
            await pilot.pause()
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def report_text(screen: AnalysisScreen) -> str:
    return str(screen.query_one("#analysis-report").render())


async def open_analysis(app: MemtuiApp, pilot, key: str, failing: bool = False) -> AnalysisScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
    await pilot.press(key)

    def done() -> bool:
        screen = app.screen
        if not isinstance(screen, AnalysisScreen):
            return False
        return screen.result is not None or (failing and report_text(screen) != "computing…")

    await wait_for(pilot, done, "the analysis")
    return app.screen


async def choose_row(app: MemtuiApp, pilot, row: int) -> MainScreen:
    screen = app.screen
    table = screen.query_one("#analysis-table")
    table.move_cursor(row=row)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the explorer")
    return app.screen


async def test_why_oom_jumps_to_the_oom():
    app = app_for("oom_training")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "w")
        assert screen.result.ooms[0].verdict == "process_cap"
        assert "per-process" in report_text(screen) and "because:" in report_text(screen)
        main = await choose_row(app, pilot, 0)
        assert main.event_log.cursor_event == 710


async def test_leaks_site_row_filters_the_log_to_that_site():
    app = app_for("leak_loss_history")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "L")
        first = screen.result.sites[0]
        assert first.growing and first.frames[0]["line"] == 123
        main = await choose_row(app, pilot, 0)
        rows = main.event_log.visible_rows()
        assert 0 < len(rows) < main.current_view.n_events
        dev = main.current_view.device
        cursor = main.event_log.cursor_event
        assert cursor in rows and int(dev.lives.end[dev.lives.event_life[cursor]]) == -1  # still live: leaked
        await pilot.pause(0.1)
        assert main.segment_map.state.index == cursor  # the map follows the jump, not the old cursor
        await pilot.press("n")
        assert main.event_log.cursor_event in rows
        main.action_show_all_events()
        assert len(main.event_log.visible_rows()) == main.current_view.n_events


async def test_cycles_burst_row_and_palette():
    app = app_for("refcycle_gc_interval")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
        commands = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Why OOM", "Leaks by call site", "Reference cycles", "Diff: cursor vs end", "Compare ranks",
                      "Show all events"):
            assert title in commands
        screen = await open_analysis(app, pilot, "C")
        assert screen.result.bounded
        sites = len(screen.result.sites)
        main = await choose_row(app, pilot, sites)  # the first burst, after the site rows
        assert main.event_log.cursor_event == screen.result.bursts[0].index


async def test_cycles_lists_the_bursts_with_another_cause_the_command_lists():
    """No burst is the collector's here: the table holds every one the command lists, with its
    cause, and Enter on one goes to its first free."""
    app = app_for("leak_loss_history")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "C")
        result = screen.result
        assert result.verdict == "no cycles" and not result.sites and not result.bursts
        assert len(result.other_bursts) == 20
        table = screen.query_one("#analysis-table")
        assert table.row_count == len(result.other_bursts)
        assert [str(table.get_row_at(r)[0]) for r in range(table.row_count)] == \
            [f"{b.index:,}" for b in result.other_bursts]
        command_lasts = cycles_report(result).table("other_bursts").values("last")  # "how, collected at"
        for r, (b, last) in enumerate(zip(result.other_bursts, command_lasts)):
            how = last[:-len(f", {b.collected_at}")]
            assert how == f"{b.cause} ({b.confidence})"
            assert screen.rows[r][-1].full.endswith(f" — {how}")  # worded as the command words it
        main = await choose_row(app, pilot, 3)
        assert main.event_log.cursor_event == result.other_bursts[3].index


async def test_diff_and_ranks_screens_open():
    app = app_for("train_linear_adam")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "D")
        assert screen.result.b.index is None
        await pilot.press("escape")
        screen = await open_analysis(app, pilot, "R", failing=True)  # no rank in the name: says so
        assert "rank number" in report_text(screen)


async def test_diff_app_shows_a_diff_of_two_files():
    a, b = SHARED / "train_linear_adam.pickle", SHARED / "leak_loss_history.pickle"
    if not (a.exists() and b.exists()):
        pytest.skip("shared snapshots not available")
    sa, sb = cached(str(a)), cached(str(b))
    app = DiffApp(diff_views(view_at_end(sa, sa.devices[0]), view_at_end(sb, sb.devices[0])))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, AnalysisScreen) and app.screen.result is not None,
                       "the diff")
        assert app.screen.query_one("#analysis-table").row_count == 10
        await pilot.press("escape")
    assert app.return_code == 0


def test_sibling_rank_files(tmp_path):
    for name in ("s.rank0.pickle", "s.rank1.pickle", "s.rank12.pickle", "t.rank1.pickle", "s.rank1.pickle.xz"):
        (tmp_path / name).write_bytes(b"")
    found = [p.rsplit("/", 1)[1] for p in sibling_rank_files(str(tmp_path / "s.rank1.pickle"))]
    assert found == ["s.rank0.pickle", "s.rank1.pickle", "s.rank12.pickle"]


async def test_j_and_k_move_an_analysis_tables_cursor_as_the_arrows_do():
    from tests.conftest import SAMPLES

    snapshot = cached(str(SAMPLES / "oom_training.pickle.xz"))
    app = MemtuiApp(lambda progress: snapshot, show_source=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "L")
        table = screen.query_one("#analysis-table")
        assert table.row_count >= 2
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("j")
        assert table.cursor_row == 1
        await pilot.press("k")
        assert table.cursor_row == 0
