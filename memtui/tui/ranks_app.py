"""``memtui ranks DIR --tui``: the list of ranks, and the explorer for the rank chosen in it.

The app starts on the rank list instead of loading a snapshot; Enter opens a rank in the
explorer over the list, and q there (or during its load) comes back to the list rather
than quitting.
"""

from __future__ import annotations

from memtui.cache.store import ModelCache
from memtui.tui.app import ExplorerApp, app_keys, run_explorer
from memtui.tui.screens.rank_list import RankListScreen, Summarize


class RanksApp(ExplorerApp):
    TITLE = "memtui ranks"
    BINDINGS = app_keys("Quit / back to the ranks", ctrl_c="quit_all")

    def __init__(self, summarize: Summarize, moment: str = "peak", *, cache: ModelCache | None = None) -> None:
        super().__init__(cache=cache)
        self._summarize = summarize
        self._moment = moment

    def on_mount(self) -> None:
        self.start_key_order()
        self.push_screen(RankListScreen(self._summarize, self._moment), lambda _: self.action_quit_all())

    @property
    def rank_list(self) -> RankListScreen | None:
        found = [s for s in self.screen_stack if isinstance(s, RankListScreen)]
        return found[0] if found else None

    def action_quit_all(self) -> None:
        self.exit(0)

    def action_quit(self) -> None:
        """On the list, quit; over it (a rank's explorer, or its loading screen), back to the list."""
        if self.screen is self.rank_list:
            self.action_quit_all()
            return
        self.stop_loading()
        while self.rank_list is not None and self.screen is not self.rank_list:
            self.pop_screen()


def run_ranks_app(files: list[str], depth: int, runner, cache, moment: str = "peak", *,
                  model_cache: ModelCache | None = None) -> int:
    """Summarise ``files`` (through the summary ``cache``, on ``runner``) inside the app and
    browse them; a rank chosen is opened through ``model_cache``."""
    from memtui.fleet.rank_files import summarize_files

    def summarize(progress) -> list[dict]:
        return summarize_files(files, depth=depth, progress=progress, cache=cache, runner=runner)

    app = RanksApp(summarize, moment, cache=model_cache)
    # Quit while a rank loads ends the process at once (run_explorer): close the summary workers first.
    return run_explorer(app, model_cache.root if model_cache is not None else None, before_hard_exit=runner.close)
