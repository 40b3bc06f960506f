"""The explorer's search (`/`, `n`, `N`): run in a worker, shown where it leads, stepped through.

A controller the main screen owns (``screen.search``) and hands the search bar's messages and
the n/N keys to; it keeps what n/N step through and reaches the screen only through
:class:`~memtui.tui.screens.host.ExplorerHost`.
"""

from __future__ import annotations

import dataclasses
from functools import partial

from memtui.model.lifetimes import NONE
from memtui.tui.messages import SearchDone
from memtui.tui.screens.host import ExplorerHost
from memtui.tui.views import navigation
from memtui.tui.views.log_scope import Site
from memtui.tui.views.search import SearchResult, run_search


class SearchController:
    def __init__(self, host: ExplorerHost) -> None:
        self.host = host
        self.result: SearchResult | None = None  # what n/N step through

    def search(self, query: str) -> None:
        self.host.status.say(f"searching for {query}…")
        device = self.host.current_view.device.device
        self.host.run_worker(lambda: self.host.post_message(SearchDone(run_search(self.host.snapshot, device, query))),
                             thread=True, exclusive=True, group="search")

    def done(self, message: SearchDone) -> None:
        result = message.result
        here = self.host.current_view.device.device
        if result.found and result.device != here:
            self.host.switch_device(result.device, then=partial(self.apply, result, here))
            return
        self.apply(result)

    def apply(self, result: SearchResult, moved_from: int | None = None) -> None:
        status = self.host.status
        if not result.found:
            status.say(result.message, warning=True)
            return
        if moved_from is not None:  # the answer says which device it was found on
            result = dataclasses.replace(result, message=f"device {result.device}, not {moved_from}: {result.message}")
        self.result = result
        if result.kind == "address_n":
            match = result.matches[0]
            if match.event != NONE:
                self.host.go_to(match.event)
            else:
                self.host.show_snapshot_block(match.block)
            status.say(result.message)
            return
        if result.kind == "address" and len(result.matches) > 1:
            self._list_allocations(result)
        elif len(result.events):
            self.step(True, announce=False)
        status.say(result.message)

    def _list_allocations(self, result: SearchResult) -> None:
        from memtui.tui.screens.search_results import SearchResultsScreen

        def chosen(event: int | None) -> None:
            if event is not None:
                self.host.go_to(event)

        self.host.app.push_screen(SearchResultsScreen(self.host.current_view, result), chosen)

    def step(self, forward: bool, announce: bool = True) -> None:
        result = self.result
        if result is None or not len(result.events):
            self.host.status.say("no search results: / searches", warning=True)
            return
        left = self.host.cursor
        target, wrapped = navigation.next_in(result.events, left, forward)
        if target is None:
            return
        self.host.go_to(target)
        if announce:
            pos = int((result.events <= target).sum())
            self.host.status.say(f"match {pos:,} of {len(result.events):,} for {result.query}"
                                 + navigation.going_round(wrapped, target, left))

    def follow_site(self, scope: Site) -> None:
        """An analysis's call site took the log: n/N step through its allocations."""
        self.result = SearchResult(scope.label, "text", self.host.current_view.device.device, scope.steps,
                                   message=scope.message)

    def forget(self) -> None:
        """Another device is shown: its events are not this result's."""
        self.result = None
