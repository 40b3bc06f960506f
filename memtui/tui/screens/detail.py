"""Full-screen detail of one event: every field, both stacks, and for an OOM the figures."""

from __future__ import annotations

from functools import partial

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from memtui.model import actions as act
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.inspector_content import event_lines
from memtui.tui.widgets.key_footer import KeyFooter
from memtui.tui.widgets.stack_inspector import StackInspector


class DetailScreen(Screen):
    """Opened with Enter on an event; Escape goes back to the explorer."""

    BINDINGS = [
        Binding("escape,enter", "app.pop_screen", "Back"),
        Binding("c", "toggle_native", "C++ frames"),
    ]

    def __init__(self, view: DeviceView, event: int, show_source: bool = True) -> None:
        super().__init__()
        self.view = view
        self.event = event
        self._show_source = show_source

    def compose(self) -> ComposeResult:
        yield StackInspector(id="detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        inspector = self.query_one(StackInspector)
        is_oom = 0 <= self.event < self.view.n_events and int(self.view.device.trace.action[self.event]) == act.OOM
        inspector.border_title = ("OOM" if is_oom else "Event") + f" {self.event:,} on device {self.view.device.device}"
        inspector.options.show_source = self._show_source
        state = self.view.replayer.state_at(self.event)
        inspector.show(partial(event_lines, self.view, self.event, state))
        inspector.focus()

    def action_toggle_native(self) -> None:
        inspector = self.query_one(StackInspector)
        inspector.set_show_native(not inspector.options.show_native)
