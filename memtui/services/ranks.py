"""ranks: one snapshot per rank, side by side; which rank is not like the others."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memtui.analysis.rank_overview import group_outliers, peak_histogram
from memtui.analysis.ranks import compare_ranks
from memtui.fleet.rank_files import summarize_files
from memtui.report.ranks import FULL_TABLE_RANKS, ranks_report
from memtui.report.sections import Report
from memtui.services.common import depth_option
from memtui.services.options import option


@dataclass(frozen=True)
class RanksOptions:
    at: str = option("peak", "compare call sites at each rank's peak (default) or at snapshot time (end)",
                     kind="choice", choices=("peak", "end"))
    depth: int = depth_option()


@dataclass
class RanksResult:
    data: dict[str, Any]  # ranks_json
    summaries: list[dict[str, Any]]  # one per file, failed ones too
    at: str

    def to_json(self) -> dict[str, Any]:
        return self.data

    def report(self) -> Report:
        # The table (with many ranks: the outliers and the median rank), the histogram, the groups.
        return ranks_report(self.data, self.at, self.data["outlier_groups"], self.data["histogram"],
                            limit=FULL_TABLE_RANKS)


def ranks(files: list[str], options: RanksOptions, runner: Any, cache: Any,
          progress: Callable[[int, int, int], None] | None = None) -> RanksResult:
    """Summarise ``files`` (on ``runner``, through the summary ``cache``) and compare them.
    ``progress(done, total, failed)`` is told as files finish."""
    summaries = summarize_files(files, depth=options.depth, progress=progress, cache=cache, runner=runner)
    return RanksResult(ranks_json(summaries, options.at), summaries, options.at)


def ranks_json(summaries: list[dict[str, Any]], moment: str = "peak") -> dict[str, Any]:
    """What ``ranks --json`` prints: :func:`compare_ranks` with the outlier groups and the
    histogram of peaks."""
    result = compare_ranks(summaries, moment)
    return {**result, "outlier_groups": group_outliers(result), "histogram": peak_histogram(result)}
