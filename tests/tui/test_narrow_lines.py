"""The explorer's one-line summaries at any width: an item is shown whole or not at all.

At 80 columns the summary bar wrapped after "reserved" and hid its figure, and the
timeline's legend was cut to "peak 1.92" (the unit gone) or to "peak". Each now leaves out
whole items, the least telling first, and an empty device's plot is topped with 0 B, not 1 B.
"""

from __future__ import annotations

import re

import pytest

from memtui.tui.widgets.summary_bar import SummaryBar
from memtui.tui.widgets.timeline import Timeline
from tests.conftest import SAMPLES
from tests.tui.helpers import make_app, ready, settle

FIGURE = r"-?[\d,.]+ (B|KiB|MiB|GiB|TiB)"
LABELS = ("reserved", "allocated", "active", "peak", "alloc", "res")


def _whole(line: str) -> None:
    """Every label the line shows is followed by its whole figure."""
    for label in LABELS:
        for found in re.finditer(rf"(?<![\w-]){label} ", line):
            assert re.match(FIGURE, line[found.end():]), (label, line)


@pytest.mark.parametrize("width", [60, 80, 100, 200])
async def test_the_summary_and_the_legend_show_whole_items_at_any_width(width):
    app = make_app(SAMPLES / "oom_training.pickle.xz")
    async with app.run_test(size=(width, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        summary = screen.query_one(SummaryBar)
        text = str(summary.render())
        assert "\n" not in text and len(text) <= summary.content_size.width
        assert text.startswith("oom_training.pickle.xz")
        _whole(text)
        timeline = screen.query_one(Timeline)
        legend = timeline.render_line(0).text.rstrip()
        assert len(legend) <= width and "event" in legend
        _whole(legend)
        if width >= 200:  # room for everything: nothing left out
            assert all(f"{label} " in text for label in ("reserved", "allocated", "active", "peak"))
            assert "allocated" in legend and "peak" in legend
        # Left out in order: what is shown outranks what is not.
        order = ["device", "reserved ", "allocated ", " events", "peak ", "active "]
        shown = [word in text for word in order]
        assert shown == sorted(shown, reverse=True), (order, text)


async def test_an_empty_devices_plot_is_topped_with_zero_bytes():
    app = make_app(SAMPLES / "multistream.pickle.xz")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        empty = [d.device for d in screen.snapshot.present_devices if not len(d.trace)]
        if not empty:
            pytest.skip("every device of the sample has events")
        screen.switch_device(empty[0])
        await settle(app, pilot)
        assert screen.current_view.device.device == empty[0]
        timeline = screen.query_one(Timeline)
        assert timeline.render_line(1).text.strip().startswith("0 B")
