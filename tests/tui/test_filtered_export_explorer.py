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
