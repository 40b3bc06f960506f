"""The explorer's filter (`\\`): the text asked for, its scope computed in a worker, the bar's words.

A controller the main screen owns (``screen.filter``) and hands the filter bar's messages
and keys to; it keeps the filter asked for (the scope's, or one still computing) and
reaches the screen only through :class:`~memtui.tui.screens.host.ExplorerHost` and the bar.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.worker import get_current_worker

from memtui.tui.messages import FilterDone
from memtui.tui.screens.host import ExplorerHost
from memtui.tui.views.log_scope import ALL, Site, filter_scope
from memtui.tui.widgets.filter_bar import FilterBar


class FilterController:
    def __init__(self, host: ExplorerHost, bar: Callable[[], FilterBar]) -> None:
        self.host = host
        self._bar = bar  # the screen's filter bar, once it is composed
        self.text = ""  # the filter asked for: the scope's, or one still computing

    @property
    def bar(self) -> FilterBar:
        return self._bar()

    def open(self) -> None:
        self.bar.open(self.text)
        self.host.status.say("type a filter · Enter applies · Esc clears · ? lists examples")

    def checked(self, message: FilterBar.Checked) -> None:
        if message.error is None:
            self.host.status.say("Enter applies the filter" if message.text.strip() else "empty filter: every event")
        else:
            self.host.status.say(message.error.message, warning=True)

    # The bar gives the focus back itself, at once (keys typed right after Enter go to the
    # pane it came from); these run later and leave the focus alone.
    def apply(self, text: str) -> None:
        if text:
            self.host.status.say(f"filtering: {text}…")
            self.run(text)
        else:
            self.clear()

    def clear(self, show_all_events: Callable[[], None] | None = None) -> None:
        """Esc: close the bar and drop the filter; with none, leave an analysis's call-site
        view (``show_all_events``)."""
        if self.bar.is_open:
            self.bar.close()
        if self.text:
            self.host.set_scope(ALL)
            self.host.status.say("filter cleared: every event")
        elif isinstance(self.host.scope, Site) and show_all_events is not None:
            show_all_events()

    def forget(self) -> None:
        """Another scope took the log: the filter asked for is gone, its worker too."""
        self.text = ""

    def run(self, text: str) -> None:
        """Masks are computed in a worker: a compound filter over ten million events takes a
        few tenths of a second. The log keeps its rows until the new ones arrive."""
        self.text = text
        device = self.host.current_view.device.device
        self.host.run_worker(lambda: self._compute(text, device), thread=True, exclusive=True, group="filter")

    def _compute(self, text: str, device: int) -> None:
        from memtui.query import FilterError

        worker = get_current_worker()
        try:
            scope = filter_scope(self.host.snapshot, device, text)
        except FilterError as exc:
            self.host.post_message(FilterDone(None, exc.message))
            return
        if not worker.is_cancelled:
            self.host.post_message(FilterDone(scope))

    def done(self, message: FilterDone) -> None:
        scope = message.scope
        if scope is None:
            self.host.status.say(message.error or "filter failed", warning=True)
        elif scope.text == self.text and scope.device == self.host.current_view.device.device:
            self.host.set_scope(scope)  # else a newer filter or another device took over meanwhile
            count = f"{len(scope.rows):,} of {scope.total:,}"
            if len(scope.rows):
                self.host.status.say(f"{count} events match · Esc clears · x exports them")
            else:
                self.host.status.say(f"no event matches {scope.text} · Esc clears", warning=True)
