"""A key that moves the event cursor draws again only the lines it changed: the map's rows
whose bar or label differs, the inspector's lines that differ, the plot's legend (and its
axis where the cursor's column moved); what is on screen is still what a whole redraw
draws, after any keys (memtui/tui/widgets/changed_lines.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.stack_inspector import StackInspector
from memtui.tui.widgets.timeline import Timeline
from tests.tui.helpers import make_app, ready, settle

SAMPLES = Path(__file__).parents[2] / "sample_snapshots"
TRAIN = SAMPLES / "train_linear_adam.pickle.xz"


async def _screen_text(app, pilot) -> str:
    await pilot.pause(0.05)
    return app.export_screenshot()


async def _whole_redraw(app, pilot) -> str:
    """The screen drawn from nothing: every widget's lines, and the map's kept strips, forgotten."""
    for widget in app.screen.query("*"):
        if isinstance(widget, SegmentMap):
            widget._row_strips.clear()
        widget.refresh()
    return await _screen_text(app, pilot)


@pytest.mark.parametrize("path", [TRAIN, SAMPLES / "oom_training.pickle.xz",
                                  SAMPLES / "expandable_segments.pickle.xz"], ids=lambda p: p.name)
async def test_the_screen_after_keys_is_a_whole_redraws(path):
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await settle(app, pilot)
        # Cursor steps and pages (blocks come and go), the map's own keys (the selected
        # segment and block), its list mode, the OOM, the first event, back to the end.
        for keys in (("up",) * 3, ("pageup", "up", "down"), ("tab", "down", "right", "right"),
                     ("m", "down"), ("m", "shift+tab"), ("o",), ("home", "down"), ("end", "up")):
            await pilot.press(*keys)
            shown = await _screen_text(app, pilot)
            assert shown == await _whole_redraw(app, pilot), keys


async def test_a_step_of_the_cursor_draws_few_lines(monkeypatch):
    drawn: dict[type, int] = {}
    for cls in (SegmentMap, StackInspector, Timeline):
        def counting(self, y, _draw=cls.render_line, _cls=cls):
            drawn[_cls] = drawn.get(_cls, 0) + 1
            return _draw(self, y)

        monkeypatch.setattr(cls, "render_line", counting)
    app = make_app(TRAIN)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await settle(app, pilot)
        await pilot.press("end")
        await pilot.pause(0.1)
        timeline = app.screen.query_one(Timeline)
        for _ in range(4):
            drawn.clear()
            await pilot.press("up")
            await pilot.pause(0.1)
            # The map: its figures and the selected segment's line, and a row or two of bars;
            # the plot: its legend and at most its axis, of its whole height.
            assert drawn.get(SegmentMap, 0) <= 8, drawn
            assert drawn.get(Timeline, 0) <= 2 < timeline.size.height, drawn


async def test_addresses_past_2_63_are_drawn_and_stepped_through(tmp_path):
    # uint64 columns: the bars' offsets and their keys overflowed int64 (the map raised).
    import pickle

    from memtui.open import open_snapshot
    from memtui.tui.app import MemtuiApp
    from memtui.tui.screens.main import MainScreen
    from tests.fixtures.tiny_snapshot import BASE, tiny_snapshot

    shift = (1 << 63) + (1 << 62) - BASE + 0x1000_0000
    snap = tiny_snapshot()
    for trace in snap["device_traces"]:
        for entry in trace:
            if entry["addr"]:
                entry["addr"] += shift
    for seg in snap["segments"]:
        seg["address"] += shift
        for block in seg["blocks"]:
            block["address"] += shift
    path = tmp_path / "high.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    model = open_snapshot(path, cache=None)
    assert model.devices[0].segments.address.dtype == np.uint64
    app = MemtuiApp(lambda progress: model, show_source=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await settle(app, pilot)
        await pilot.press("up", "up", "home", "down")
        await pilot.pause(0.1)
        smap = app.screen.query_one(SegmentMap)
        assert isinstance(app.screen, MainScreen) and app.return_code is None
        rows = [smap.render_line(y).text for y in range(3, 3 + smap._layout.n_segments)]
        addresses = [f"{int(a):x}" for a in smap.state.seg_addr]
        assert rows and all(address in row for address, row in zip(addresses, rows))
        assert all(int(a) >= 1 << 63 for a in smap.state.seg_addr)
