"""The explorer at 80x24 and 40x12: the report screens scroll to their last line, call sites
print as ``file.py:line function`` with the full path under the table, the footer shows
``w``, and the event log and the map get their rows before the plot and the summary."""

from __future__ import annotations

import re

import pytest

from memtui.tui.screens.analysis_base import AnalysisScreen, ReportTable
from memtui.tui.screens.main import MainScreen
from memtui.tui.widgets.key_footer import KeyFooter
from tests.conftest import SHARED
from tests.tui.helpers import make_app, ready, settle, tiny_path

OOM_TRAINING = SHARED / "oom_training.pickle"


def screen_text(app) -> str:
    """What the terminal shows, as plain text lines (from the SVG screenshot)."""
    svg = app.export_screenshot()
    lines = []
    for row in re.findall(r'<text class="[^"]*" x="[^"]*" y="([^"]*)"[^>]*>([^<]*)</text>', svg):
        lines.append(row)
    by_y: dict[float, str] = {}
    for y, text in lines:
        by_y[float(y)] = by_y.get(float(y), "") + text.replace("&#160;", " ").replace("&amp;", "&")
    return "\n".join(by_y[y] for y in sorted(by_y))


async def open_report(app, pilot, key: str) -> AnalysisScreen:
    await ready(app, pilot)
    await pilot.press(key)
    for _ in range(300):
        await pilot.pause(0.02)
        if isinstance(app.screen, AnalysisScreen) and app.screen.result is not None:
            await settle(app, pilot)
            return app.screen
    raise AssertionError("the analysis never finished")


def _path(path):
    if not path.exists():
        pytest.skip(f"snapshot not available: {path}")
    return path


async def test_why_oom_at_80x24_scrolls_to_the_advice_and_prints_short_call_sites():
    app = make_app(_path(OOM_TRAINING))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_report(app, pilot, "w")
        page = screen.query_one("#analysis-body")
        assert page.max_scroll_y > 0  # the report does not fit: it must scroll
        assert "requested at" not in screen_text(app)
        for _ in range(3):
            before = page.scroll_y
            await pilot.press("pagedown")
            assert page.scroll_y > before or page.scroll_y == page.max_scroll_y
        await pilot.press("home")
        assert page.scroll_y == 0
        await pilot.press(*["down"] * 4)
        assert page.scroll_y == 4  # Down reads on through the report
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        assert "requested at" in text and "Raise the cap" in text  # the advice, at the end of the report
        table = screen.query_one(ReportTable)
        assert table.cursor_row == table.row_count - 1
        # Call sites: file.py:line function, never the first characters of a folder.
        shown = [str(table.get_row_at(r)[-1]) for r in range(table.row_count)]
        assert shown[1] == "gen_snapshots.py:160 w_oom_training"
        assert not any(s.startswith("/") for s in shown)
        assert table.max_scroll_x == 0  # nothing hides to the right
        await pilot.press("home", "down")  # back to the top, then onto the first call site
        while table.cursor_row < 1:
            await pilot.press("down")
        detail = str(screen.query_one("#analysis-detail").render())
        assert detail.endswith("/gen_snapshots.py:160 w_oom_training") and detail.startswith("/")


async def test_every_report_screen_scrolls_to_its_last_row_at_80x24():
    app = make_app(tiny_path())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        for key in ("w", "L", "C", "D"):
            screen = await open_report(app, pilot, key)
            page = screen.query_one("#analysis-body")
            table = screen.query_one(ReportTable)
            await pilot.press("end")
            assert page.scroll_y == page.max_scroll_y
            if table.row_count:
                assert table.cursor_row == table.row_count - 1
                assert table.max_scroll_x == 0
                cells = [str(table.get_row_at(r)[-1]) for r in range(table.row_count)]
                assert not any("/home/user/project" in c for c in cells), cells
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, MainScreen)


async def test_80x24_gives_the_event_log_and_the_map_their_rows_and_shows_w():
    app = make_app(tiny_path())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app, pilot)
        await pilot.pause()
        assert screen.event_log.scrollable_content_region.height - 1 >= 8  # event rows under the header
        assert screen.segment_map.size.height >= 8
        footer = app.screen.query_one(KeyFooter)
        footer.render_line(0)
        cells = footer.cells_of("w")
        assert cells is not None and cells[1] <= 80 - 12  # clear of the palette hint
        assert "Why OOM" in screen_text(app).splitlines()[-1]
        await pilot.press("t")  # the plot comes back on request
        assert screen.query_one("Timeline").display


async def test_40x12_still_shows_event_rows():
    app = make_app(tiny_path())
    async with app.run_test(size=(40, 12)) as pilot:
        screen = await ready(app, pilot)
        await pilot.pause()
        assert screen.event_log.scrollable_content_region.height - 1 >= 3
        assert "▶" in screen_text(app)  # the cursor row is on screen
