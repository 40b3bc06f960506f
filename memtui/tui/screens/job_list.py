"""The live jobs memtui can see: one line per job (its ranks together); Enter watches one."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from memtui.live.runtime import JobInfo
from memtui.live.views import duration
from memtui.tui.widgets.choice_list import ChoiceList
from memtui.tui.widgets.key_footer import KeyFooter


def group_jobs(jobs: list[JobInfo]) -> list[list[JobInfo]]:
    groups: dict[str, list[JobInfo]] = {}
    for job in jobs:
        groups.setdefault(job.job or str(job.pid), []).append(job)
    return list(groups.values())


def describe(group: list[JobInfo]) -> str:
    first = group[0]
    ranks = f"{len(group)} ranks" if len(group) > 1 else (f"rank {first.rank}" if first.rank is not None else "")
    devices = sorted({d for j in group for d in j.devices})
    command = " ".join(first.argv)[:60] if first.argv else "?"
    pids = ",".join(str(pid) for pid in sorted({j.pid for j in group}))
    return (f"pid {pids}  {ranks:<8} device {','.join(map(str, devices)) or '?'}  "
            f"running {duration(first.running_for()):>7}  {command}")


class JobListScreen(Screen):
    BINDINGS = [("enter", "watch", "Watch")]

    def __init__(self, jobs: list[JobInfo], on_choose: Callable[[list[JobInfo]], None]) -> None:
        super().__init__()
        self.groups = group_jobs(jobs)
        self._on_choose = on_choose

    def compose(self) -> ComposeResult:
        yield Static(f"{len(self.groups)} live jobs: choose one to watch", id="jobs-title")
        yield ChoiceList(*[Option(describe(g)) for g in self.groups], id="jobs")
        yield KeyFooter()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self._on_choose(self.groups[message.option_index])

    def action_watch(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None:
            self._on_choose(self.groups[index])
