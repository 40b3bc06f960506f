"""The breakdown at one event, full screen: the timeline stacked by category, the bytes per
category with their largest call sites, and the live set as a call tree.

The screen has its own event cursor (`,` `.` one event, `<` `>` one step's peak, `P` the
peak); each move replays the allocator to that event and sums the live set it holds
(memtui/tui/views/breakdown_view.py), so moving costs what the explorer's own cursor costs.
Closing it hands the event back, and the explorer's cursor goes there.
"""

from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, Static

from memtui.analysis.breakdown import step_peaks
from memtui.model.snapshot import NOT_REPLAYED, SOURCE_END
from memtui.tui.views.breakdown_view import DeviceBreakdown
from memtui.tui.widgets.breakdown_pane import BreakdownPane
from memtui.tui.widgets.call_tree import CallTree
from memtui.tui.widgets.key_footer import KeyFooter
from memtui.tui.widgets.timeline import Timeline
from memtui.units import format_bytes


class BreakdownScreen(Screen[int]):
    """Dismissed with the event its cursor is on."""

    DEFAULT_CSS = """
    BreakdownScreen #breakdown-status { height: auto; max-height: 2; color: $text-muted; padding: 0 1; }
    BreakdownScreen #breakdown-timeline { height: 7; }
    BreakdownScreen.-short #breakdown-timeline { height: 5; }
    BreakdownScreen #breakdown-panes { height: 1fr; }
    BreakdownScreen #breakdown-pane { width: 44; border-left: none; }
    BreakdownScreen.-narrow #breakdown-panes { layout: vertical; }
    BreakdownScreen.-narrow #breakdown-pane { width: 1fr; height: 5; }
    BreakdownScreen #breakdown-tree { width: 1fr; height: 1fr; border-top: solid $panel-lighten-2;
                                      border-left: solid $panel-lighten-2; }
    BreakdownScreen.-narrow #breakdown-tree { border-left: none; }
    BreakdownScreen #breakdown-pane:focus { border-left: none; }
    BreakdownScreen #breakdown-tree:focus { border-top: solid $accent; }
    BreakdownScreen #breakdown-search { display: none; height: 1; border: none; padding: 0 1; }
    BreakdownScreen #breakdown-search.-open { display: block; }
    """
    BINDINGS = [
        Binding("escape,q,b", "close", "Back"),
        Binding("comma", "step_event(-1)", "Previous event"),
        Binding("full_stop", "step_event(1)", "Next event"),
        Binding("less_than_sign", "step_peak(False)", "Previous step's peak", show=False),
        Binding("greater_than_sign", "step_peak(True)", "Next step's peak", show=False),
        Binding("P", "peak", "Peak", show=False),
        Binding("tab", "focus_next", "Next pane", show=False),
    ]

    def __init__(self, model: DeviceBreakdown, event: int) -> None:
        super().__init__()
        self.model = model
        self.event = max(min(event, model.view.n_events - 1), -1)
        self._show_internal = False
        self._steps: np.ndarray | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="breakdown-status")
        yield Timeline(id="breakdown-timeline")
        with Horizontal(id="breakdown-panes"):
            yield BreakdownPane(id="breakdown-pane")
            yield CallTree(id="breakdown-tree")
        yield Input(placeholder="search frames (file, function); Enter finds, Esc closes", id="breakdown-search")
        yield KeyFooter()

    @property
    def pane(self) -> BreakdownPane:
        return self.query_one(BreakdownPane)

    @property
    def tree(self) -> CallTree:
        return self.query_one(CallTree)

    def on_mount(self) -> None:
        timeline = self.query_one(Timeline)
        timeline.set_view(self.model.view)
        timeline.set_stacked(self.model.values_at, self.model.names)
        self.pane.border_title = "By category"
        self.tree.border_title = "Live set by call stack"
        self._fit()
        self._show()
        self.tree.focus()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Narrow: the categories go above the tree (a few rows) so the tree keeps the width;
        short: the plot shrinks, then hides."""
        width, height = self.size
        self.set_class(height < 30, "-short")
        self.set_class(width < 120, "-narrow")
        self.query_one(Timeline).display = height >= 18
        self._fit_pane()

    def _fit_pane(self) -> None:
        if self.has_class("-narrow"):
            shown = sum(1 for v in (self.pane.breakdown.categories.values() if self.pane.breakdown else []) if v)
            self.pane.styles.height = min(max(shown, 1) + 3, 9)
        else:
            self.pane.styles.height = "1fr"

    # -- the cursor -------------------------------------------------------------------------
    def _show(self, message: str | None = None) -> None:
        i = self.event
        state = self.model.state(i)
        result = self.model.at(i, state)
        self.pane.show(result, 0 if self.has_class("-narrow") else 2, hint=False)
        self._fit_pane()
        self.tree.set_tree(self.model.tree(i, state, self._show_internal), self.model.names)
        self.query_one(Timeline).set_cursor(max(i, 0))
        n, dev = self.model.view.n_events, self.model.view.device
        where = f"event {dev.shown_index(i):,} of {n:,}" if i >= 0 else "the snapshot's state"
        if dev.partial_trace:
            where = SOURCE_END
        self._say(message or f"{where} · {format_bytes(result.allocated)} allocated · "
                             f"{format_bytes(result.cached_free)} cached free · , . < > P move")

    def _say(self, text: str) -> None:
        self.query_one("#breakdown-status", Static).update(text)

    def go_to(self, event: int, message: str | None = None) -> None:
        n = self.model.view.n_events
        if not n:
            return
        self.event = max(0, min(int(event), n - 1))
        self._show(message)

    def action_step_event(self, delta: int) -> None:
        self.go_to(self.event + delta)

    def action_peak(self) -> None:
        view = self.model.view
        if view.n_events:
            self.go_to(int(np.argmax(view.allocated)), f"the allocated peak: {format_bytes(view.peak_allocated)}")

    def _step_peak_events(self) -> np.ndarray:
        if self._steps is None:
            view = self.model.view
            found = step_peaks(view.snapshot, view.device, view.allocated) if view.n_events else None
            self._steps = np.array([p.peak for p in found[1]], np.int64) if found else np.zeros(0, np.int64)
        return self._steps

    def action_step_peak(self, forward: bool) -> None:
        if self.model.view.device.partial_trace:
            self._say(f"no step peaks: {NOT_REPLAYED}")
            return
        peaks = self._step_peak_events()
        if not len(peaks):
            self._say("no step markers or optimizer annotations in this trace")
            return
        if forward:
            later = peaks[peaks > self.event]
            target = int(later[0]) if len(later) else int(peaks[-1])
        else:
            earlier = peaks[peaks < self.event]
            target = int(earlier[-1]) if len(earlier) else int(peaks[0])
        k = int(np.searchsorted(peaks, target)) + 1
        self.go_to(target, f"step {k} of {len(peaks)}: its peak, event {self.model.view.device.shown_index(target):,}")

    def on_timeline_seek(self, message: Timeline.Seek) -> None:
        self.go_to(message.event)

    def on_timeline_cursor_changed(self, message: Timeline.CursorChanged) -> None:
        message.stop()  # this screen's own timeline: the explorer's views do not follow it

    # -- the tree ------------------------------------------------------------------------------
    def on_call_tree_internal_toggled(self, message: CallTree.InternalToggled) -> None:
        self._show_internal = message.show
        self._show(f"internal frames {'shown' if message.show else 'hidden'}")

    def on_call_tree_search_requested(self, _: CallTree.SearchRequested) -> None:
        box = self.query_one("#breakdown-search", Input)
        box.add_class("-open")
        box.value = ""
        box.focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self._close_search()
        found = self.tree.search(message.value)
        self._say(self.tree.message if found or not message.value.strip() else
                  f"no frame of this live set matches {message.value.strip()!r}")

    def _close_search(self) -> None:
        self.query_one("#breakdown-search", Input).remove_class("-open")
        self.tree.focus()

    def on_call_tree_node_selected(self, message: CallTree.NodeSelected) -> None:
        """Why the selected node's memory is what it is: its largest category and the rule
        that put it there (docs/analyses.md, Categories)."""
        node = message.node
        code = node.top_rule()
        if code is None:
            return
        names = self.model.names
        top = int(np.argmax(node.categories))
        self._say(f"{format_bytes(int(node.categories[top]))} {names[top]}: {self.model.table.rule_text(code)}")

    def on_call_tree_status(self, message: CallTree.Status) -> None:
        if message.text:
            self._say(message.text)

    def on_breakdown_pane_tree_requested(self, _: BreakdownPane.TreeRequested) -> None:
        self.tree.focus()

    def action_close(self) -> None:
        if self.query_one("#breakdown-search", Input).has_class("-open"):
            self._close_search()
            return
        self.dismiss(self.event)
