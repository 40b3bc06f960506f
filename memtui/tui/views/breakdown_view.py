"""What the explorer's breakdown views need per device, computed once in a worker.

Pure numpy (no textual import): the category of every allocation (one vectorised pass,
memtui/analysis/categories.py) and the call sites. After that, the breakdown at any
event comes from the replay's state there (the live set the explorer already replays for
its cursor), never from a pass over the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.breakdown import Breakdown, breakdown, category_values_at, live_from_state
from memtui.analysis.callsites import CallSites
from memtui.analysis.categories import CategoryTable, categorize
from memtui.analysis.category_rules import CategoryRules
from memtui.analysis.live_tree import TreeNode, live_tree
from memtui.analysis.moments import Moment
from memtui.tui.views.device_view import DeviceView


@dataclass
class DeviceBreakdown:
    view: DeviceView
    table: CategoryTable
    sites: CallSites

    @property
    def device(self) -> int:
        return self.view.device.device

    @property
    def names(self) -> list[str]:
        return self.table.names

    def state(self, event: int, state=None):
        """The replayed state after ``event`` (``state`` when it is that one already)."""
        if state is not None and state.index == max(min(event, self.view.n_events - 1), -1):
            return state
        return self.view.replayer.state_at(event)

    def at(self, event: int, state=None, top: int = 3) -> Breakdown:
        state = self.state(event, state)
        live = live_from_state(self.table, state)
        reserved = int(self.view.reserved[state.index]) if 0 <= state.index < len(self.view.reserved) else \
            self.view.device.reserved
        # A filtered export's every moment is the file's own state, the source's end (NOT_REPLAYED).
        moment = Moment(-1, "end") if self.view.device.partial_trace else Moment(state.index, "event")
        return breakdown(self.view.snapshot, self.view.device, self.table, live, moment, reserved, self.sites, top)

    def tree(self, event: int, state=None, show_internal: bool = False) -> TreeNode:
        live = live_from_state(self.table, self.state(event, state))
        return live_tree(self.view.snapshot, live, len(self.table.names), show_internal)

    def values_at(self, points: np.ndarray) -> np.ndarray:
        return category_values_at(self.table, self.view.device, points)


def build_device_breakdown(view: DeviceView, rules: CategoryRules | None = None) -> DeviceBreakdown:
    table = categorize(view.snapshot, view.device, rules)
    return DeviceBreakdown(view, table, CallSites(view.snapshot.stacks))
