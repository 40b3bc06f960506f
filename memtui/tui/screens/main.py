"""The explorer: summary, timeline, event log, segment map and stack inspector of one device.

The event cursor drives everything: moving it replays the allocator to that event
(time travel) and shows the event in the inspector. Jumps (OOM, search, same address,
alloc/free) all end in :meth:`MainScreen.go_to`.

What the event log lists is one value, :attr:`MainScreen.scope` (memtui/tui/views/log_scope.py):
every event, a filter's matches (`\\`) or an analysis's call site; :meth:`MainScreen.set_scope`
changes it and everything that shows it. The export (`x`) writes what the scope lists.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen

from memtui.cores import after_the_answer
from memtui.model import Snapshot
from memtui.model import actions as act
from memtui.model.lifetimes import NONE
from memtui.tui.messages import BreakdownReady, DeviceReady, FilterDone, SearchDone
from memtui.tui.one_frame import draw_in_this_frame
from memtui.tui.screens.analysis_actions import analysis_screen
from memtui.tui.screens.breakdown_controller import BreakdownController
from memtui.tui.screens.filter_controller import FilterController
from memtui.tui.screens.search_controller import SearchController
from memtui.tui.views import navigation
from memtui.tui.views.analysis_jumps import AnalysisJump
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.filter_actions import FILTER_KEYS, FILTER_PALETTE
from memtui.tui.views.first_view import prepare_view
from memtui.tui.views.inspector_content import block_lines, event_lines, segment_lines
from memtui.tui.views.key_table import (
    ANALYSIS_KEYS,
    ANALYSIS_PALETTE,
    BREAKDOWN_KEYS,
    BREAKDOWN_PALETTE,
    key_label,
)
from memtui.tui.views.log_scope import ALL, Filter, LogScope, Site
from memtui.tui.widgets.event_log import EventLog
from memtui.tui.widgets.filter_bar import FilterBar
from memtui.tui.widgets.key_footer import KeyFooter
from memtui.tui.widgets.search_bar import SearchBar
from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.stack_inspector import StackInspector
from memtui.tui.widgets.status_line import StatusLine
from memtui.tui.widgets.summary_bar import SummaryBar
from memtui.tui.widgets.timeline import Timeline
from memtui.tui.workers import thread_work
from memtui.units import format_bytes, plural

if TYPE_CHECKING:  # the categories' pane comes with b: its module is imported then
    from memtui.tui.widgets.breakdown_pane import BreakdownPane

# (key, action, description, shown in the footer); the palette offers the same actions.
SCREEN_KEYS = [
    ("o", "next_oom", "Next OOM", True),
    ("O", "previous_oom", "Previous OOM", False),
    ("slash", "search", "Search", True),
    ("n", "next_match", "Next match", False),
    ("N", "previous_match", "Previous match", False),
    ("left_square_bracket", "same_address(False)", "Previous event at this address", False),
    ("right_square_bracket", "same_address(True)", "Next event at this address", False),
    ("f", "along_life(True)", "Life: next event", False),
    ("F", "along_life(False)", "Life: previous event", False),
    ("d", "next_device", "Switch device", False),
    ("t", "toggle_timeline", "Timeline", False),
    ("c", "toggle_native", "C++ frames", False),
]
# Actions offered in the palette besides the keyed ones: (action, title, help).
PALETTE_EXTRA = [
    ("go_to_peak", "Go to peak", "Move the cursor to the event where allocated memory peaks"),
    ("focus_pane('events')", "Focus event log", "Move the keyboard focus to the event log"),
    ("focus_pane('map')", "Focus segment map", "Move the keyboard focus to the segment map"),
    ("focus_pane('inspector')", "Focus stack inspector", "Move the keyboard focus to the stack inspector"),
    ("toggle_map_mode", "Segment map: map/list", "Switch the segment map between bars and an exact list"),
    ("detail", "Event detail", "Open the full detail of the selected event"),
]
SCREEN_KEYS += ANALYSIS_KEYS + FILTER_KEYS + BREAKDOWN_KEYS
PALETTE_EXTRA += ANALYSIS_PALETTE + FILTER_PALETTE + BREAKDOWN_PALETTE
# The footer shows the keys marked shown above, in this order, so that the ones a newcomer
# needs first fit in 80 columns (after the focused pane's own keys); every key is in `?`
# help and the palette.
FOOTER_ORDER = ["o", "w", "slash", "backslash", "x"]


# Terminal heights (rows) below which the layout gives up something for the event log and the map.
TIMELINE_FULL_HEIGHT = 34  # the plot shrinks to 6 rows
TIMELINE_MIN_HEIGHT = 30  # the plot hides until t asks for it (80x24: 8 event rows instead of 3)
TINY_HEIGHT = 16  # the summary hides and the event log takes 3/5 of what is left (40x12)


class MainScreen(Screen):
    BINDINGS = [Binding(key, action, description, show=show) for key, action, description, show in
                sorted(SCREEN_KEYS, key=lambda k: FOOTER_ORDER.index(k[0]) if k[0] in FOOTER_ORDER else 99)]

    def __init__(self, snapshot: Snapshot, view: DeviceView, show_source: bool = True) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.current_view = view
        self._views: dict[int, DeviceView] = {view.device.device: view}
        self._show_source = show_source
        self.scope: LogScope = ALL  # what the event log lists: change it with set_scope
        self.breakdown = BreakdownController(self)  # b, B and T: memory by category
        self.filter_control = FilterController(self, lambda: self.query_one(FilterBar))  # \\ and Esc
        self.search_control = SearchController(self)  # /, n and N
        self._timeline_wanted: bool | None = None  # None: shown when the terminal is tall enough
        self._answered_at: int | None = None  # the event the status line's answer is about (go_to)

    # -- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # The widgets most handlers talk to, kept at hand (the screen has one of each).
        self.event_log = EventLog(id="events")
        self.segment_map = SegmentMap(id="map")
        self.inspector = StackInspector(id="inspector")
        self.status = StatusLine(id="status")
        yield SummaryBar(id="summary")
        yield Timeline(id="timeline")
        yield self.event_log
        with Horizontal(id="panes"):
            yield self.segment_map
            yield self.inspector
        yield SearchBar(id="search")
        yield FilterBar(id="filter")
        yield self.status
        yield KeyFooter()

    def on_unmount(self) -> None:
        closed = getattr(self.app, "explorer_closed", None)
        if closed is not None:
            closed()  # what this screen held can be collected (memtui/tui/app.py)

    def on_mount(self) -> None:
        # Fitted to the terminal before the first layout: fitted only on the first resize, the
        # plot's display set then made a second layout and a redraw of every pane just after
        # the first screen, which the first key waited for.
        self._fit_height(self.app.size.height)
        self.inspector.border_title = "Stack"
        self.inspector.options.show_source = self._show_source
        self._apply_view(self.current_view)
        self.event_log.focus()
        self.status.say("? help · / search · o next OOM · Tab next pane")
        if self.snapshot.replaced_values_note:
            self.status.say(f"{self.snapshot.replaced_values_note}: see memtui check", warning=True)
        if self.snapshot.load_notice:
            self.status.say(self.snapshot.load_notice, warning=True)

    def on_resize(self) -> None:
        self._fit_height(self.size.height)

    def _fit_height(self, height: int) -> None:
        """On a short terminal the event log and the map get their rows first: the plot
        shrinks, then hides (t shows it again), and on a tiny one the summary goes too.
        Only what changes is set: setting the display it has still lays the screen out again."""
        timeline = self.query_one(Timeline)
        timeline.set_class(height < TIMELINE_FULL_HEIGHT, "-short")
        shown = self._timeline_wanted if self._timeline_wanted is not None else height >= TIMELINE_MIN_HEIGHT
        if timeline.display != shown:
            timeline.display = shown
        self.set_class(height < TINY_HEIGHT, "-tiny")

    def _apply_view(self, view: DeviceView, event: int | None = None) -> None:
        self.current_view = view
        self.query_one(SummaryBar).show_view(view, len(self.snapshot.present_devices))
        self.query_one(Timeline).set_view(view)
        self.event_log.set_view(view, event)
        self.search_control.forget()
        cursor = self.event_log.cursor_event
        self.show_event(cursor if cursor is not None else -1)
        text = self.filter_control.text
        self.set_scope(ALL)
        if text:  # the same filter, on the device now shown
            self.filter_control.run(text)
        if not view.replayer.indexed:  # the time-travel index, built once the keys pause
            self.app.when_keys_pause(partial(self._index_when_shown, view))

    def _index_when_shown(self, view: DeviceView) -> None:
        if self.is_attached and self.current_view is view and not view.replayer.indexed:
            self._index_view(view)

    @thread_work(group="index")
    def _index_view(self, view: DeviceView) -> None:
        # Asked by the inspector for the first event without a stack: a pass over every
        # event (25 ms at 10M; a warm open has it from the cache), made here, first, rather
        # than in the key that first needs it (the index after it takes a second); at the
        # worker's own priority, as the thread that draws may wait on it (cached_property's
        # lock on Python 3.10 and 3.11).
        view.device.actions_with_stacks  # noqa: B018
        after_the_answer(view.index_replayer)  # the keys typed meanwhile get the cores first

    # -- the cursor ----------------------------------------------------------------
    def go_to(self, event: int) -> bool:
        """Move the cursor to ``event`` and show it everywhere; False if the view hides it."""
        if not self.event_log.go_to_event(event, notify=False):
            self.status.say(f"event {self.current_view.device.shown_index(event):,} is hidden by the current view",
                            warning=True)
            return False
        self.show_event(event)
        self._answered_at = event  # what the status line says next is about this event
        return True

    def show_event(self, i: int, focus_address: int | None = None) -> None:
        """Time travel: the map shows the state after ``i``, the inspector shows event ``i``."""
        view = self.current_view
        state = view.replayer.state_at(i)
        if focus_address is None and 0 <= i < view.n_events:
            code = int(view.device.trace.action[i])
            if code not in (act.OOM, act.SNAPSHOT):
                focus_address = int(view.device.trace.addr[i])
        self.segment_map.show_state(view, state, focus_address)
        self._title_map()
        self.inspector.show(partial(event_lines, view, i, state))
        timeline = self.query_one(Timeline)
        timeline.set_cursor(max(i, 0))
        draw_in_this_frame(self, self.segment_map, self.inspector, timeline)  # with the event log's cursor

    def _title_map(self) -> None:
        self.segment_map.refresh_title()  # the map says what it counts (memtui.state_figures)

    def on_event_log_cursor_moved(self, message: EventLog.CursorMoved) -> None:
        if message.event != self.event_log.cursor_event:
            # Stale: the cursor moved again since, without a message, by a move that showed
            # its own event (go_to); a device shown (its last event announced) and then a
            # jump on it (o to another device's OOM) would otherwise end on the last event.
            return
        if self._answered_at is not None and message.event != self._answered_at:
            # The cursor moved on from the event a jump or a search answered about: that
            # answer (``event 623: alloc …``, ``match 3 of 9``) would read as this event's.
            self._answered_at = None
            self.status.say("")
        self.show_event(message.event)

    def on_event_log_detail_requested(self, message: EventLog.DetailRequested) -> None:
        from memtui.tui.screens.detail import DetailScreen

        self.app.push_screen(DetailScreen(self.current_view, message.event, self._show_source))

    def on_timeline_seek(self, message: Timeline.Seek) -> None:
        self.go_to(message.event)

    def on_segment_map_block_selected(self, message: SegmentMap.BlockSelected) -> None:
        view = self.current_view
        if message.block != NONE:
            self.inspector.show(partial(block_lines, view, message.state, message.block))
        elif message.segment != NONE:
            self.inspector.show(partial(segment_lines, view, message.state, message.segment))

    def on_segment_map_jump_to_event(self, message: SegmentMap.JumpToEvent) -> None:
        self.go_to(message.event)

    @property
    def cursor(self) -> int:
        event = self.event_log.cursor_event
        return -1 if event is None else event

    # -- jump keys -------------------------------------------------------------------
    def _jump(self, jump: navigation.Jump) -> None:
        if jump.event is None:
            self.status.say(jump.message, warning=True)
            return
        if self.go_to(jump.event):
            # Always answer the key: a message left by an earlier one (a search) would read as
            # this jump's.
            self.status.say(jump.message or self._describe_event(jump.event))

    def _describe_event(self, event: int) -> str:
        """``event 1,234: free_requested 7f06…_0`` for the status line."""
        view = self.current_view
        name = view.snapshot.actions.name(int(view.device.trace.action[event]))
        address_n = view.device.event_address_n(event)
        return f"event {view.device.shown_index(event):,}: {name}" + (f" {address_n}" if address_n else "")

    def action_next_oom(self) -> None:
        self._jump_to_oom(True)

    def action_previous_oom(self) -> None:
        self._jump_to_oom(False)

    def _jump_to_oom(self, forward: bool) -> None:
        """The next OOM on this device; with none here, the first OOM of a device that has one."""
        jump = navigation.oom(self.current_view.device, self.cursor, forward)
        other = self.snapshot.oom_elsewhere(self.current_view.device.device)
        if jump.event is not None or other is None:
            self._jump(jump)
            return
        device, event = other
        here = self.current_view.device.device

        def arrive() -> None:
            self._jump(navigation.Jump(event, f"device {here} has no OOM: this is device {device}'s, "
                                              f"at event {self.snapshot.device(device).shown_index(event):,}"))

        self.switch_device(device, then=arrive)

    def action_same_address(self, forward: bool) -> None:
        self._jump(navigation.same_address(self.current_view.device, self.cursor, forward))

    def action_along_life(self, forward: bool) -> None:
        self._jump(navigation.along_life(self.current_view.device, self.cursor, forward))

    def action_go_to_peak(self) -> None:
        view = self.current_view
        if view.n_events:
            self.go_to(int(view.allocated.argmax()))
            self.status.say(f"peak allocated: {format_bytes(view.peak_allocated)}")

    # -- by category (memtui/tui/screens/breakdown_controller.py) ---------------------------------------------
    def action_breakdown(self) -> None:
        self.breakdown.toggle_pane()

    def action_breakdown_tree(self) -> None:
        self.breakdown.open_tree()

    def action_toggle_stacked(self) -> None:
        self.breakdown.toggle_stacked()

    def on_breakdown_ready(self, message: BreakdownReady) -> None:
        self.breakdown.ready(message)

    def on_timeline_cursor_changed(self, message: Timeline.CursorChanged) -> None:
        self.breakdown.cursor_changed(message.event)

    def on_breakdown_pane_tree_requested(self, _: BreakdownPane.TreeRequested) -> None:
        self.breakdown.open_tree()

    def action_toggle_timeline(self) -> None:
        self._timeline_wanted = not self.query_one(Timeline).display
        self._fit_height(self.size.height)

    def action_toggle_native(self) -> None:
        self.inspector.set_show_native(not self.inspector.options.show_native)
        self.status.say("C++ frames " + ("shown" if self.inspector.options.show_native else "hidden"))

    def action_toggle_map_mode(self) -> None:
        self.segment_map.action_toggle_mode()

    def on_segment_map_mode_changed(self, _: SegmentMap.ModeChanged) -> None:
        self._title_map()

    def action_focus_pane(self, pane: str) -> None:
        self.query_one(f"#{pane}").focus()

    def action_detail(self) -> None:
        self.event_log.action_detail()

    # -- devices -----------------------------------------------------------------------
    def action_next_device(self) -> None:
        numbers = [d.device for d in self.snapshot.present_devices]
        if len(numbers) < 2:
            self.status.say("this snapshot has one device", warning=True)
            return
        current = self.current_view.device.device
        later = [d for d in numbers if d > current]
        self.switch_device(later[0] if later else numbers[0])

    def switch_device(self, d: int, then: Callable[[], None] | None = None) -> None:
        if d in self._views:
            self._device_ready(self._views[d], then)
        else:
            self.status.say(f"preparing device {d}…")
            self._build_view(d, then)

    @thread_work(exclusive=True, group="device")
    def _build_view(self, d: int, then: Callable[[], None] | None) -> None:
        # As the first device's view was prepared: its curves from the cache where kept, and
        # what the first screen of it needs made here, not on the thread that draws.
        cache, source = self.current_view.kept_with or (None, None)
        self.post_message(DeviceReady(prepare_view(self.snapshot, d, cache, source), then))

    def on_device_ready(self, message: DeviceReady) -> None:
        self._device_ready(message.view, message.then)

    def _device_ready(self, view: DeviceView, then: Callable[[], None] | None) -> None:
        self._views[view.device.device] = view
        self._apply_view(view)
        self.status.say(f"device {view.device.device}: {plural(view.n_events, 'event')}")
        if then is not None:
            then()

    # -- what the event log lists (memtui/tui/views/log_scope.py) --------------------------------
    def set_scope(self, scope: LogScope, at: int | None = None) -> None:
        """List ``scope``'s events: the log's rows and title, the filter's marks on the
        timeline and the map, and (for a call site) what n/N step through change together.
        A scope other than a filter drops the filter asked for. ``at``: the event the cursor
        stays on through the change (it must be in ``scope``)."""
        if not isinstance(scope, Filter):
            self.filter_control.forget()
            self.workers.cancel_group(self, "filter")
        self.scope = scope
        log = self.event_log
        # Changing the rows makes the log announce its cursor; with ``at`` every change ends
        # with the cursor there, so the last announcement (the one the map and the inspector
        # follow) is the target's.
        if at is not None:
            if log.row_of_event(at) is None:
                log.set_rows(None)
            log.go_to_event(at, notify=False)
        log.set_rows(scope.rows)
        log.border_title = scope.title
        self.query_one(Timeline).set_marks(scope.marks)
        self.segment_map.set_highlight(scope.matched_lives)
        if isinstance(scope, Site):
            self.search_control.follow_site(scope)

    # -- the filter (`\\`: memtui/tui/screens/filter_controller.py) ----------------------------------
    def action_filter(self) -> None:
        self.filter_control.open()

    def on_filter_bar_checked(self, message: FilterBar.Checked) -> None:
        self.filter_control.checked(message)

    def on_filter_bar_apply(self, message: FilterBar.Apply) -> None:
        self.filter_control.apply(message.text)

    def on_filter_bar_cleared(self, _: FilterBar.Cleared) -> None:
        self.action_clear_filter()

    def action_clear_filter(self) -> None:
        self.filter_control.clear(show_all_events=self.action_show_all_events)

    def on_filter_done(self, message: FilterDone) -> None:
        self.filter_control.done(message)

    # -- analyses (w, L, C, D, R) ------------------------------------------------------------
    def action_analysis(self, name: str) -> None:
        self.app.push_screen(analysis_screen(name, self.current_view, max(self.cursor, 0)), self._analysis_chosen)

    def _analysis_chosen(self, jump: AnalysisJump | None) -> None:
        """A row chosen in an analysis screen: go to its event; a call site's row lists the
        site's events in place of what the log listed."""
        if jump is None or jump.event is None:
            return
        if jump.rows is not None:
            steps = jump.steps if jump.steps is not None else jump.rows
            self.set_scope(Site(jump.label, jump.rows, steps, jump.message), at=jump.event)
        elif isinstance(self.scope, Site):
            self.set_scope(ALL)
        if not self.event_log.go_to_event(jump.event, notify=True):
            self.status.say(f"event {self.current_view.device.shown_index(jump.event):,} is hidden by the current"
                            " view", warning=True)
        elif jump.message:
            self.status.say(jump.message)

    def action_show_all_events(self) -> None:
        if not isinstance(self.scope, Site):
            self.status.say("the event log is not filtered by an analysis")
            return
        self.set_scope(ALL)
        self.status.say("showing all events")

    # -- export (`x`) -------------------------------------------------------------------------
    def action_export(self) -> None:
        from memtui.tui.screens.export_dialog import ExportDialog, ExportRequest

        place = self.app.export_place
        if place.off:
            self.status.say(place.off, warning=True)
            return
        view = self.current_view
        request = ExportRequest.of_scope(self.snapshot, view.device.device, view.n_events, self.scope)
        self.app.push_screen(ExportDialog(request, place), self._export_finished)

    def _export_finished(self, result) -> None:
        if result is not None:
            path = os.path.abspath(result.path)
            self.status.say(f"wrote {path}: {plural(result.events, 'event')}, {format_bytes(result.bytes)}")

    # -- search (memtui/tui/screens/search_controller.py) ---------------------------------------
    # The bar moves the focus itself, at once; these handlers run later and must not move it
    # again (a second `/` typed meanwhile has already reopened the bar).
    def action_search(self) -> None:
        self.status.display = False
        self.query_one(SearchBar).open()

    def _search_bar_gone(self) -> None:
        bar = self.query_one(SearchBar)
        self.status.display = not bar.is_open
        if self.focused is None and not bar.is_open:
            self.set_focus(self.event_log)

    def on_search_bar_closed(self, _: SearchBar.Closed) -> None:
        self._search_bar_gone()

    def on_search_bar_search(self, message: SearchBar.Search) -> None:
        self._search_bar_gone()
        self.search_control.search(message.query)

    def on_search_done(self, message: SearchDone) -> None:
        self.search_control.done(message)

    def show_snapshot_block(self, final_block: int) -> None:
        """An allocation only known from the snapshot's block list: show it at the last event."""
        view = self.current_view
        last = view.n_events - 1
        address = int(view.device.blocks.address[final_block])
        if last >= 0:
            self.event_log.go_to_event(last, notify=False)
        self.show_event(last, focus_address=address)
        state = self.segment_map.state
        if state is not None and self.segment_map.selected_block != NONE:
            self.inspector.show(partial(block_lines, view, state, self.segment_map.selected_block))

    def action_next_match(self) -> None:
        self.search_control.step(True)

    def action_previous_match(self) -> None:
        self.search_control.step(False)

    # -- palette -----------------------------------------------------------------------------
    def palette_commands(self) -> Iterable[SystemCommand]:
        """One command per action: a keyed action says its key, and takes the longer title
        and help of its PALETTE_EXTRA entry when it has one."""
        extra = {action: (title, help_text) for action, title, help_text in PALETTE_EXTRA}
        for key, action, description, _show in SCREEN_KEYS:
            title, help_text = extra.get(action, (description, description))
            yield SystemCommand(title, f"{help_text} (key: {key_label(key)})", partial(self.run_action, action))
        keyed = {action for _key, action, _description, _show in SCREEN_KEYS}
        for action, title, help_text in PALETTE_EXTRA:
            if action not in keyed:
                yield SystemCommand(title, help_text, partial(self.run_action, action))
