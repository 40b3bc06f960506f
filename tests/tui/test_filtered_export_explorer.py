"""The explorer on a filtered export: the OOM's figures and the diff of the cursor with the
end are not made up from the source's end; events carry the source's numbers."""

from __future__ import annotations

from pathlib import Path

from memtui.cli import main
from memtui.tui.screens.analysis_base import AnalysisScreen
from tests.tui.helpers import make_app, ready, settle

SOURCE = Path(__file__).resolve().parents[2] / "sample_snapshots" / "oom_training.pickle.xz"


async def test_a_filtered_exports_oom_and_diff_say_they_cannot_tell(tmp_path):
    out = tmp_path / "big_only.msgpack"
    assert main(["--no-cache", "export", str(SOURCE), "--filter", "size>100MiB", "-o", str(out)]) == 0
    app = make_app(out)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("o")
        await settle(app, pilot)
        text = screen.inspector.text
        dev = screen.current_view.device
        assert f"event {dev.shown_index(screen.event_log.cursor_event):,} · OOM" in text
        assert "cannot tell" in text and "not replayed" in text and "largest free" not in text
        await pilot.press("D")
        for _ in range(300):
            if isinstance(app.screen, AnalysisScreen) and "computing" not in str(
                    app.screen.query_one("#analysis-report").render()):
                break
            await pilot.pause(0.01)
        assert "not replayed" in str(app.screen.query_one("#analysis-report").render())


async def test_a_free_whose_alloc_was_left_out_says_so_in_the_inspector(tmp_path):
    # Only frees exported: the inspector's life line gives the free its source number and says
    # the alloc was left out by the filter, not that it came before the trace.
    from memtui.model.snapshot import ALLOC_LEFT_OUT

    out = tmp_path / "frees_only.msgpack"
    assert main(["--no-cache", "export", str(SOURCE), "--filter", "action:free_completed", "-o", str(out)]) == 0
    app = make_app(out)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home")
        await settle(app, pilot)
        dev = screen.current_view.device
        text = screen.inspector.text
        assert ALLOC_LEFT_OUT in text and "before the trace" not in text, text
        assert f"free completed {dev.shown_index(screen.event_log.cursor_event):,}" in text, text
