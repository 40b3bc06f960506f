"""The explorer's filter (`\\`) and export (`x`).

A filter narrows the event log to the matching events ("12,345 of 1,000,000"); the
timeline and the segment map keep showing the whole trace and mark what matches (the
timeline under its axis, the map by drawing matching allocations apart). Masks are
computed in a worker: a compound filter over ten million events takes a few tenths of
a second. Mixed into the main screen, which provides ``current_view``, ``event_log``,
``status``, ``go_to`` and ``show_event``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from textual import work
from textual.message import Message
from textual.worker import get_current_worker

from memtui.query import FilterError, compile_filter
from memtui.tui.widgets.filter_bar import FilterBar
from memtui.units import format_bytes, plural

# (key, action, description, shown in the footer), as the main screen lists its keys.
FILTER_KEYS = [
    ("backslash", "filter", "Filter", True),
    ("x", "export", "Export", True),
    ("escape", "clear_filter", "Clear filter", False),
]
FILTER_PALETTE = [
    ("filter", "Filter events", "Show only the events matching a filter expression (docs/filter.md)"),
]
# Shown in the help screen: what people filter for, most common first.
FILTER_EXAMPLES = [
    ("size>1MiB file:train.py leaked", "big allocations from train.py never freed"),
    ("action:alloc live", "allocations still in memory at the end"),
    ("action:oom or action:segment", "OOMs and cudaMalloc/cudaFree"),
    ("func:forward -freed", "forward's allocations not freed in the trace"),
    ("time:10s..12s", "two seconds of the trace (time since its first event)"),
    ("event:1000..2000", "a window of events by index"),
    ("id:7f064c000000_0", "one allocation's alloc and frees (a bare id works too)"),
    ("stream:0x55d0c0a81f30", "one CUDA stream"),
    ("pool:0,0 seg:7f0640000000", "the default pool, one segment"),
    ('ctx:"Region: 0/0" meta:epoch=3', "compile context, user metadata"),
    ("a or b, -a, not a, ( )", "combine: spaces AND, or, not; parentheses group"),
]


@dataclass
class FilterResult:
    text: str
    device: int
    rows: np.ndarray  # matching trace indices, ascending
    matched_lives: np.ndarray  # per block life of the device: does any of its events match
    total: int


class FilterDone(Message):
    def __init__(self, result: FilterResult | None, error: str | None = None) -> None:
        super().__init__()
        self.result = result
        self.error = error


class FilterActions:
    _filter_text: str = ""
    _filter_result: FilterResult | None = None

    # -- the bar ------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.query_one(FilterBar).open(self._filter_text)
        self.status.say("type a filter · Enter applies · Esc clears · ? lists examples")

    def on_filter_bar_checked(self, message: FilterBar.Checked) -> None:
        if message.error is None:
            self.status.say("Enter applies the filter" if message.text.strip() else "empty filter: every event")
        else:
            self.status.say(message.error.message, warning=True)

    # The bar gives the focus back itself, at once (keys typed right after Enter go to the
    # pane it came from); these handlers run later and leave the focus alone.
    def on_filter_bar_apply(self, message: FilterBar.Apply) -> None:
        if not message.text:
            self.action_clear_filter()
            return
        self._filter_text = message.text
        self.status.say(f"filtering: {message.text}…")
        self._run_filter(message.text, self.current_view.device.device)

    def on_filter_bar_cleared(self, _: FilterBar.Cleared) -> None:
        self.action_clear_filter()

    def action_clear_filter(self) -> None:
        bar = self.query_one(FilterBar)
        if bar.is_open:
            bar.close()
        had_filter = self._filter_result is not None or bool(self._filter_text)
        self._forget_filter()
        if not had_filter and getattr(self, "_analysis_filter", None) is not None:
            # Esc also leaves an analysis's call-site view, the other way the log narrows.
            self.action_show_all_events()
        elif had_filter:
            self.event_log.set_rows(None)
            self.query_one("#events").border_title = "Events"
            self.status.say("filter cleared: every event")

    def _forget_filter(self) -> None:
        self.workers.cancel_group(self, "filter")
        self._filter_text = ""
        self._filter_result = None
        self._show_marks(None)

    # -- evaluation -------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="filter")
    def _run_filter(self, text: str, device: int) -> None:
        worker = get_current_worker()
        try:
            rows = compile_filter(text).indices(self.snapshot, device)
        except FilterError as exc:
            self.post_message(FilterDone(None, exc.message))
            return
        dev = self.snapshot.devices[device]
        life = dev.lives.event_life[rows]
        matched = np.zeros(len(dev.lives) + 1, bool)
        matched[life] = True  # -1 (no life) lands in the extra last slot
        if not worker.is_cancelled:
            self.post_message(FilterDone(FilterResult(text, device, rows, matched[:-1], len(dev.trace))))

    def on_filter_done(self, message: FilterDone) -> None:
        result = message.result
        if result is None:
            self.status.say(message.error or "filter failed", warning=True)
            return
        if result.text != self._filter_text or result.device != self.current_view.device.device:
            return  # a newer filter or another device took over meanwhile
        self._filter_result = result
        self._analysis_filter = None  # the filter replaces any call-site view an analysis set
        self.event_log.set_rows(result.rows)
        count = f"{len(result.rows):,} of {result.total:,}"
        self.query_one("#events").border_title = f"Events: {count} · {result.text}"
        self._show_marks(result)
        if len(result.rows):
            self.status.say(f"{count} events match · Esc clears · x exports them")
        else:
            self.status.say(f"no event matches {result.text} · Esc clears", warning=True)

    def _show_marks(self, result: FilterResult | None) -> None:
        from memtui.tui.widgets.segment_map import SegmentMap
        from memtui.tui.widgets.timeline import Timeline

        self.query_one(Timeline).set_marks(None if result is None else result.rows)
        self.query_one(SegmentMap).set_highlight(None if result is None else result.matched_lives)

    def reapply_filter(self) -> None:
        """The shown device changed: run the same filter on it."""
        self._filter_result = None
        self._show_marks(None)
        if self._filter_text:
            self._run_filter(self._filter_text, self.current_view.device.device)

    def _analysis_chosen(self, jump) -> None:
        # An analysis that lists a call site's events replaces the filter's view.
        if jump is not None and jump.rows is not None and self._filter_text:
            self._forget_filter()
        super()._analysis_chosen(jump)

    # -- export ------------------------------------------------------------------------------
    def action_export(self) -> None:
        from memtui.tui.screens.export_dialog import ExportDialog, ExportRequest

        view = self.current_view
        log = self.event_log
        filtered = self._filter_result is not None or getattr(self, "_analysis_filter", None) is not None
        request = ExportRequest(
            snapshot=self.snapshot,
            device=view.device.device,
            rows=log.visible_rows() if filtered else None,
            filter_text=self._filter_text if self._filter_result is not None else "",
            selection=getattr(self, "_analysis_filter", None),
            total=view.n_events,
        )
        self.app.push_screen(ExportDialog(request), self._export_finished)

    def _export_finished(self, result) -> None:
        if result is not None:
            path = os.path.abspath(result.path)
            self.status.say(f"wrote {path}: {plural(result.events, 'event')}, {format_bytes(result.bytes)}")
