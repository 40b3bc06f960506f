"""The explorer on a filtered export: the OOM's figures and the diff of the cursor with the
end are not made up from the source's end; events carry the source's numbers."""

from __future__ import annotations

from pathlib import Path

from memtui.cli import main
from memtui.tui.screens.analysis_base import AnalysisScreen
from tests.tui.helpers import make_app, ready, settle

SOURCE = Path(__file__).resolve().parents[2] / "sample_snapshots" / "oom_training.pickle.xz"


def _exported(tmp_path, filter_text: str) -> Path:
    """The source's events that ``filter_text`` keeps, exported."""
    out = tmp_path / "filtered.msgpack"
    assert main(["--no-cache", "export", str(SOURCE), "--filter", filter_text, "-o", str(out)]) == 0
    return out


async def _after_key(app, pilot, key: str):
    """The main screen, its device and the inspector's text once ``key`` is answered."""
    screen = await ready(app, pilot)
    await pilot.press(key)
    await settle(app, pilot)
    return screen, screen.current_view.device, screen.inspector.text


async def test_a_filtered_exports_oom_and_diff_say_they_cannot_tell(tmp_path):
    app = make_app(_exported(tmp_path, "size>100MiB"))
    async with app.run_test(size=(140, 44)) as pilot:
        screen, dev, text = await _after_key(app, pilot, "o")
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

    app = make_app(_exported(tmp_path, "action:free_completed"))
    async with app.run_test(size=(140, 44)) as pilot:
        screen, dev, text = await _after_key(app, pilot, "home")
        assert ALLOC_LEFT_OUT in text and "before the trace" not in text, text
        assert f"free completed {dev.shown_index(screen.event_log.cursor_event):,}" in text, text
