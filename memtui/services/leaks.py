"""leaks: live memory by call site, and what grew over the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.analysis.leaks import LeakReport, find_leaks
from memtui.model import Snapshot
from memtui.report.leaks import leaks_report
from memtui.report.sections import Report
from memtui.services.common import depth_option, device_index, device_option, over_time, top_option
from memtui.services.options import option


@dataclass(frozen=True)
class LeaksOptions:
    device: int | None = device_option()
    depth: int = depth_option()
    windows: int = option(10, "time windows to sample when no step annotations mark iterations (default 10)",
                          low=2, high=500)
    points: int = option(24, "at most this many points over the run in each call site's series (its trend;"
                              " default 24)", low=2, high=500)
    top: int = top_option(20, "call sites to list besides the growing ones (default 20)")


@dataclass
class LeaksResult:
    leaks: LeakReport

    def to_json(self) -> dict[str, Any]:
        return self.leaks.to_json()

    def report(self) -> Report:
        return leaks_report(self.leaks)


def leaks(snapshot: Snapshot, options: LeaksOptions) -> LeaksResult:
    dev = over_time(snapshot.devices[device_index(snapshot, options.device)], "leaks")
    return LeaksResult(find_leaks(snapshot, dev, options.depth, options.points, options.windows, options.top))
