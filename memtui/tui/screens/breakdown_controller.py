"""The explorer's breakdown keys: `b` shows bytes per category at the cursor in place of the
stack inspector (and follows the cursor), `B` opens the live set as a call tree at the
cursor, `T` draws the timeline stacked by category.

A controller the main screen owns (``screen.breakdown``) and hands its keys and messages to;
it reads only the screen's public parts (``current_view``, ``cursor``, ``inspector``,
``segment_map``, ``status``, ``go_to``, ``action_toggle_timeline``) and keeps its own state.
Every category is decided once per device in a worker (memtui/tui/views/breakdown_view.py); after
that a cursor move costs one sum over the live set the explorer has already replayed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtui.errors import MemtuiError
from memtui.tui.messages import BreakdownReady
from memtui.tui.widgets.timeline import Timeline

# The categories, their rules and their pane are imported when b, B or T first asks for them:
# 20 ms of the explorer's start that its first screen does not use.
if TYPE_CHECKING:
    from memtui.analysis.category_rules import CategoryRules
    from memtui.tui.views.breakdown_view import DeviceBreakdown
    from memtui.tui.widgets.breakdown_pane import BreakdownPane

PANE_ID = "breakdown"  # the categories' pane, in place of the stack inspector


class BreakdownController:
    def __init__(self, screen) -> None:
        self.screen = screen
        self._breakdowns: dict[int, DeviceBreakdown] = {}
        self._breakdown_wanted: str | None = None  # what to show when the categories arrive
        self._stacked_wanted = False
        self._category_rules: CategoryRules | None = None

    # -- keys ----------------------------------------------------------------------------------
    def toggle_pane(self) -> None:
        if self._breakdown_pane() is not None:
            self._close_breakdown_pane()
            self.screen.status.say("stack inspector")
            return
        self._open_breakdown_pane()
        self._with_breakdown("pane")

    def open_tree(self) -> None:
        self._with_breakdown("tree")

    def toggle_stacked(self) -> None:
        timeline = self.screen.query_one(Timeline)
        if timeline.stacked:
            self._stacked_wanted = False
            timeline.set_stacked(None)
            self.screen.status.say("timeline: allocated and reserved")
            return
        self._stacked_wanted = True
        if not timeline.display:
            self.screen.action_toggle_timeline()
        self._with_breakdown("stacked")

    # -- the categories of the device shown -------------------------------------------------------
    def _with_breakdown(self, what: str) -> None:
        model = self._breakdowns.get(self.screen.current_view.device.device)
        if model is not None and model.view is self.screen.current_view:
            self._use_breakdown(model, what)
            return
        self._breakdown_wanted = what
        self.screen.status.say("sorting allocations into categories…")
        self._build_breakdown(self.screen.current_view)

    def _build_breakdown(self, view) -> None:
        self.screen.run_worker(lambda: self._decide(view), thread=True, exclusive=True, group="breakdown")

    def _decide(self, view) -> None:
        """In a worker thread: the categories of ``view``'s device, posted to the screen."""
        from memtui.analysis.category_rules import CategoryRules, load_rules
        from memtui.tui.views.breakdown_view import build_device_breakdown

        try:
            if self._category_rules is None:
                self._category_rules = load_rules(None)
        except MemtuiError as exc:
            self._category_rules = CategoryRules()
            self.screen.post_message(BreakdownReady(build_device_breakdown(view),
                                                    f"{exc.message}; built-in rules only"))
            return
        self.screen.post_message(BreakdownReady(build_device_breakdown(view, self._category_rules)))

    def ready(self, message: BreakdownReady) -> None:
        if message.model is None:
            self.screen.status.say(message.error, warning=True)
            return
        self._breakdowns[message.model.device] = message.model
        what, self._breakdown_wanted = self._breakdown_wanted, None
        # "sorting allocations into categories…" is done: the pane and the stacked timeline
        # say what they show; the call tree's screen says it itself.
        self.screen.status.say(message.error or "", warning=bool(message.error))
        if message.model.view is self.screen.current_view:
            if self._stacked_wanted:
                self._use_breakdown(message.model, "stacked", quiet=what != "stacked")
            self._use_breakdown(message.model, what or "pane")

    def _use_breakdown(self, model: DeviceBreakdown, what: str, quiet: bool = False) -> None:
        if what == "stacked":
            self.screen.query_one(Timeline).set_stacked(model.values_at, model.names)
            if not quiet:
                self.screen.status.say("timeline: stacked by category (T: allocated and reserved)")
        elif what == "pane" and not quiet:
            self.screen.status.say("by category at the cursor, following it (b: the stack again, Enter: call tree)")
        elif what == "tree":
            from memtui.tui.screens.breakdown import BreakdownScreen

            def back(event: int | None) -> None:
                if event is not None and event >= 0 and event != self.screen.cursor:
                    self.screen.go_to(event)

            self.screen.app.push_screen(BreakdownScreen(model, self.screen.cursor), back)
        self._follow(model)

    # -- following the cursor --------------------------------------------------------------------
    def cursor_changed(self, event: int) -> None:
        timeline = self.screen.query_one(Timeline)
        model = self._breakdowns.get(self.screen.current_view.device.device)
        fresh = model is not None and model.view is self.screen.current_view
        if timeline.stacked and not fresh:
            timeline.set_stacked(None)  # another device: its own categories come next
        if (self._breakdown_pane() is not None or self._stacked_wanted) and not fresh:
            if self._breakdown_wanted is None:
                self._breakdown_wanted = "pane"
                self._build_breakdown(self.screen.current_view)
            return
        if fresh:
            if self._stacked_wanted and not timeline.stacked:
                timeline.set_stacked(model.values_at, model.names)
            self._follow(model, event)

    def _follow(self, model: DeviceBreakdown, event: int | None = None) -> None:
        pane = self._breakdown_pane()
        if pane is None:
            return
        i = self.screen.cursor if event is None else event
        state = self.screen.segment_map.state  # the explorer replayed this event already
        pane.show(model.at(i, state))

    # -- the pane ------------------------------------------------------------------------------------
    def _breakdown_pane(self) -> BreakdownPane | None:
        found = self.screen.query(f"#{PANE_ID}")  # by its id: its class is imported when first opened
        return found.first() if found else None

    def _open_breakdown_pane(self) -> None:
        from memtui.tui.widgets.breakdown_pane import BreakdownPane

        pane = BreakdownPane(id=PANE_ID)
        pane.border_title = "By category"
        inspector = self.screen.inspector
        inspector.parent.mount(pane, after=inspector)
        pane.styles.width = "1fr"
        inspector.display = False
        pane.show_message("sorting allocations into categories…")

    def _close_breakdown_pane(self) -> None:
        pane = self._breakdown_pane()
        if pane is not None:
            had_focus = pane.has_focus
            pane.remove()
            self.screen.inspector.display = True
            if had_focus:
                self.screen.inspector.focus()

