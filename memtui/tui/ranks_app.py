"""``memtui ranks DIR --tui``: the list of ranks, and the explorer for the rank chosen in it.

The app starts on the rank list instead of loading a snapshot; Enter opens a rank in the
explorer over the list, and q there (or during its load) comes back to the list rather
than quitting.
"""

from __future__ import annotations

import os
import sys

from textual import events
from textual.binding import Binding

from memtui.cache import ModelCache
from memtui.tui.app import MemtuiApp
from memtui.tui.lifecycle import run_in_terminal
from memtui.tui.screens.rank_list import RankListScreen, Summarize


class RanksApp(MemtuiApp):
    TITLE = "memtui ranks"
    BINDINGS = [
        Binding("q", "quit", "Quit / back to the ranks"),
        Binding("question_mark", "help", "Help"),
        Binding("ctrl+c", "quit_all", "Quit", show=False),
    ]

    def __init__(self, summarize: Summarize, moment: str = "peak", *, cache: ModelCache | None = None) -> None:
        super().__init__(lambda progress: None, cache=cache)  # nothing to load until a rank is chosen
        self._summarize = summarize
        self._moment = moment

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()  # the explorer's own on_mount would start loading a snapshot
        self.push_screen(RankListScreen(self._summarize, self._moment), lambda _: self.exit(0))

    @property
    def rank_list(self) -> RankListScreen | None:
        found = [s for s in self.screen_stack if isinstance(s, RankListScreen)]
        return found[0] if found else None

    def on_load_finished(self, message) -> None:
        if not self._opening_another:  # a rank whose loading was stopped with q finished anyway
            message.prevent_default()

    def action_quit_all(self) -> None:
        self.exit(0)

    async def action_quit(self) -> None:
        if self.screen is self.rank_list:
            self.exit(0)
            return
        if self.loading:  # q on the loading screen of a rank: stop loading it
            self.workers.cancel_group(self, "load")
            self.loading = False
            self._opening_another = False
        while self.rank_list is not None and self.screen is not self.rank_list:
            self.pop_screen()
        self.snapshot = None


def run_ranks_app(files: list[str], depth: int, runner, cache, moment: str = "peak", *,
                  model_cache: ModelCache | None = None) -> int:
    """Summarise ``files`` (through the summary ``cache``, on ``runner``) inside the app and
    browse them; a rank chosen is opened through ``model_cache``."""
    from memtui.fleet.rank_files import summarize_files

    def summarize(progress) -> list[dict]:
        return summarize_files(files, depth=depth, progress=progress, cache=cache, runner=runner)

    app = RanksApp(summarize, moment, cache=model_cache)
    code = run_in_terminal(app, cache_root=model_cache.root if model_cache is not None else None)
    if app.loading:
        # Quit while a rank was loading: the unpickler cannot be interrupted, and waiting
        # for it would make quitting take as long as the load (as in run_app).
        runner.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
