"""The segment map and timeline as another allocator setting would have laid them out.

The same widgets as the explorer's, drawn from the allocator model's replay of the
recording (analysis/whatif_state.py) instead of the recording itself, under a banner that
says so. Keys step between the events where the simulated allocator made or released
segments ([ and ]; the arrows move in the map as in the explorer); o goes to the recorded OOM
(or where this setting runs out), p to its peak.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from memtui.allocator.settings import parse_conf
from memtui.analysis.whatif import Limit
from memtui.analysis.whatif_requests import build_requests
from memtui.analysis.whatif_state import SimulatedRun
from memtui.errors import MemtuiError
from memtui.replay import AllocatorState
from memtui.tui.messages import AnalysisComputed, AnalysisFailed, SimulatedStateReady
from memtui.tui.views.device_view import DeviceView
from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.timeline import Timeline
from memtui.tui.workers import thread_work
from memtui.units import format_bytes


class SimulatedScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("[", "step(-1)", "Previous segment event"),
        Binding("]", "step(1)", "Next segment event"),
        Binding("o", "go_oom", "OOM"),
        Binding("p", "go_peak", "Peak"),
    ]
    DEFAULT_CSS = """
    SimulatedScreen {
        align: center middle;
    }
    SimulatedScreen #sim-box {
        width: 96%;
        height: 94%;
        border: heavy $warning;
        border-title-color: $warning;
        background: $surface;
    }
    SimulatedScreen #sim-banner {
        width: 100%;
        background: $warning 30%;
        text-style: bold;
    }
    SimulatedScreen SegmentMap {
        height: 1fr;
    }
    SimulatedScreen #sim-hint {
        width: 100%;
        color: $text-muted;
    }
    """

    def __init__(self, view: DeviceView, settings: str, limit: Limit, at: int) -> None:
        super().__init__()
        self.view, self.settings, self.limit, self.at = view, settings, limit, at
        self.run: SimulatedRun | None = None
        self.sim_view: DeviceView | None = None
        self.marks = np.zeros(0, np.int64)

    def compose(self) -> ComposeResult:
        with Vertical(id="sim-box"):
            yield Label("", id="sim-banner")
            yield Timeline(id="sim-timeline")
            yield SegmentMap(id="sim-map")
            yield Label("[ ] the previous/next segment event · o the OOM · p the peak · ↑↓←→ the map · Esc close",
                        id="sim-hint")

    def on_mount(self) -> None:
        name = self.settings or "default"
        self.query_one("#sim-box").border_title = f"SIMULATED: {name}"
        self._banner(f"SIMULATED with {name}: the allocator model's layout, not what ran. Computing…")
        self._compute()

    def _banner(self, text: str) -> None:
        self.query_one("#sim-banner", Label).update(Text(text))

    @thread_work(exclusive=True, group="simulated", exit_on_error=False)
    def _compute(self) -> None:
        try:
            requests = build_requests(self.view.device)
            run = SimulatedRun(requests, parse_conf(self.settings), self.limit.bytes, self.limit.per_process)
            allocated, reserved = run.curves(self.view.n_events)
            state = run.state_at(self.at)
        except MemtuiError as exc:
            self.post_message(AnalysisFailed(exc.message))
            return
        except Exception as exc:  # a bug: say so here rather than take the explorer down
            self.post_message(AnalysisFailed(f"the simulation failed ({type(exc).__name__}: {exc})"))
            return
        self.post_message(AnalysisComputed((run, allocated, reserved, state)))

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        self._banner(message.message)

    def on_analysis_computed(self, message: AnalysisComputed) -> None:
        run, allocated, reserved, state = message.result
        self.run = run
        self.marks = run.segment_events()
        self.sim_view = dataclasses.replace(self.view, allocated=allocated, reserved=reserved)
        self.query_one(Timeline).set_view(self.sim_view)
        out = run.outcome
        stop = (f"; it runs out at event {out.stopped_at:,}: the program would have raised there, the rest"
                " is not simulated" if out.stopped_at is not None else "")
        self._banner(f"SIMULATED with {self.settings or 'default'}: the allocator model's layout, not what ran."
                     f" Reserved peak {format_bytes(out.reserved_peak)}{stop}")
        self._show(self.at, state)

    def _show(self, event: int, state: AllocatorState | None = None) -> None:
        if self.run is None or self.sim_view is None:
            return
        self.at = max(0, min(event, self.view.n_events - 1))
        self.query_one(Timeline).set_cursor(self.at)
        if state is None:
            self._state_at(self.at)  # replaying to a far event takes a moment: in a worker
            return
        self.query_one(SegmentMap).show_state(self.sim_view, state, None)

    @thread_work(exclusive=True, group="simulated-state", exit_on_error=False)
    def _state_at(self, event: int) -> None:
        run = self.run
        if run is not None:
            self.post_message(SimulatedStateReady(event, run.state_at(event)))

    def on_simulated_state_ready(self, message: SimulatedStateReady) -> None:
        if message.event == self.at and self.sim_view is not None:
            self.query_one(SegmentMap).show_state(self.sim_view, message.state, None)

    def action_step(self, delta: int) -> None:
        if not len(self.marks):
            return
        pos = int(np.searchsorted(self.marks, self.at, "right" if delta > 0 else "left"))
        pos = pos if delta > 0 else pos - 1
        if 0 <= pos < len(self.marks):
            self._show(int(self.marks[pos]))

    def action_go_oom(self) -> None:
        if self.run is None:
            return
        out = self.run.outcome
        target = next((e for e in (out.stopped_at, out.oom_event) if e is not None),
                      out.recorded_ooms[0][0] if out.recorded_ooms else None)
        if target is not None:
            self._show(target)

    def action_go_peak(self) -> None:
        if self.run is not None and self.run.outcome.peak_event >= 0:
            self._show(self.run.outcome.peak_event)

    def on_timeline_seek(self, message: Timeline.Seek) -> None:
        self._show(message.event)

    def action_close(self) -> None:
        self.dismiss(None)

