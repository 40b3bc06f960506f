"""W: the what-if table, and a setting's simulated segment map and timeline."""

from __future__ import annotations

from memtui.analysis.whatif import WhatIf
from memtui.open import open_snapshot
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.simulated import SimulatedScreen
from memtui.tui.widgets.segment_map import SegmentMap
from tests.conftest import SAMPLES
from tests.tui.test_analysis_screens import SIZE, open_analysis, wait_for

PATH = SAMPLES / "scenarios" / "oom_fragmentation_py.pickle.xz"


async def test_w_lists_the_settings_and_enter_shows_the_simulated_layout():
    snapshot = open_snapshot(PATH)
    app = MemtuiApp(lambda progress: snapshot, show_source=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_analysis(app, pilot, "W")
        result = screen.result
        assert isinstance(result, WhatIf) and result.fidelity.exact
        text = str(screen.query_one("#analysis-report").render())
        assert text.startswith(result.advice) and "fidelity: exact" in text
        table = screen.query_one("#analysis-table")
        assert table.row_count == len(result.scenarios)
        expandable = next(k for k, s in enumerate(result.scenarios) if s.settings == "expandable_segments:True")
        table.move_cursor(row=expandable)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SimulatedScreen) and app.screen.run is not None,
                       "the simulated layout")
        sim = app.screen
        banner = str(sim.query_one("#sim-banner").render())
        assert banner.startswith("SIMULATED with expandable_segments:True")
        state = sim.query_one(SegmentMap).state
        # Expandable segments: the simulated map shows mapped ranges where the recording had cudaMalloc segments.
        assert state is not None and state.seg_expandable.all() and len(state.seg_addr) >= 1
        assert state.index == result.recorded_oom
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: sim.query_one(SegmentMap).state.index < result.recorded_oom, "a step back")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SimulatedScreen), "the table again")


def test_the_screen_opens_with_the_commands_lines_and_a_missing_limit_reads_none():
    from memtui.analysis.whatif import what_if
    from memtui.services.whatif import header_lines, text_lines
    from memtui.tui.screens.whatif_report import WhatIfReportScreen

    for path in (PATH, SAMPLES / "train_linear_adam.pickle.xz"):
        snapshot = open_snapshot(path)
        result = what_if(snapshot, 0, workers=1)
        text, _ = WhatIfReportScreen(None).present(result)  # type: ignore[arg-type]
        head = header_lines(result)
        assert text.splitlines()[:len(head)] == head == text_lines(result)[:len(head)]
        if result.limit.bytes is None:
            assert any(line.startswith("limit: none:") for line in head) and "(none)" not in text
