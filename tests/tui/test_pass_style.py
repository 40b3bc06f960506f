"""The panes that draw line by line read their own style once for each drawing pass
(memtui/tui/widgets/pass_style.py), not for every line: Textual walks every ancestor's
styles for it, and that was a third of the time a key's frame took to draw."""

from __future__ import annotations

from textual.dom import DOMNode
from textual.geometry import Region

from memtui.tui.widgets.event_log import EventLog
from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.stack_inspector import StackInspector
from memtui.tui.widgets.timeline import Timeline
from tests.tui.helpers import make_app, ready, settle, tiny_path


async def test_each_pane_reads_its_own_style_once_a_pass(monkeypatch):
    reads: list[DOMNode] = []
    real = DOMNode.rich_style
    monkeypatch.setattr(DOMNode, "rich_style", property(lambda node: (reads.append(node), real.fget(node))[1]))
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        for pane in (SegmentMap, EventLog, StackInspector, Timeline):
            widget = screen.query_one(pane)
            widget.refresh()
            reads.clear()
            lines = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
            assert len(lines) == widget.size.height > 3
            assert sum(node is widget for node in reads) == 1, pane.__name__
            assert widget.base_style == widget.rich_style  # outside a pass: looked up as asked
