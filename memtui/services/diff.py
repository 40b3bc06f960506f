"""diff: what changed between two snapshots, two devices, or two moments of one trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.analysis.diff import MemoryDiff, MemoryView, diff_views, view_at_end, view_at_event
from memtui.analysis.live import allocated_curve
from memtui.analysis.moments import MOMENT_WORDS, resolve_moment
from memtui.model import Snapshot
from memtui.report.diff import diff_report
from memtui.report.sections import Report
from memtui.services.common import depth_option, device_index, top_option
from memtui.services.options import option


@dataclass(frozen=True)
class DiffOptions:
    device: int | None = option(None, "device of both sides (default: each side's own, as the explorer picks it)",
                                optional=True)
    device_a: int | None = option(None, "device of the first side", optional=True)
    device_b: int | None = option(None, "device of the second side", optional=True)
    at_a: str | None = option(None, "replay the first side to just after this moment instead of the snapshot's end"
                                    f" state: {MOMENT_WORDS}", kind="moment", optional=True, metavar="WHEN")
    at_b: str | None = option(None, "the same for the second side", kind="moment", optional=True, metavar="WHEN")
    top: int = top_option(30, "changed call sites to list, the largest growth and the largest shrink (default 30)")
    include_unchanged: bool = option(False, "list unchanged call sites too", kind="bool", flag="--all")
    depth: int = depth_option()


@dataclass
class DiffResult:
    diff: MemoryDiff
    options: DiffOptions

    def to_json(self) -> dict[str, Any]:
        return self.diff.to_json()

    def report(self) -> Report:
        return diff_report(self.diff, self.options.top, self.options.include_unchanged)


def diff(a: Snapshot, b: Snapshot, options: DiffOptions) -> DiffResult:
    view_a = side(a, _pick(options.device_a, options.device), options.at_a, options.depth, "--at-a")
    view_b = side(b, _pick(options.device_b, options.device), options.at_b, options.depth, "--at-b")
    return DiffResult(diff_views(view_a, view_b), options)


def _pick(specific: int | None, both: int | None) -> int | None:
    return specific if specific is not None else both


def side(snapshot: Snapshot, device: int | None, at: str | int | None, depth: int, flag: str) -> MemoryView:
    dev = snapshot.devices[device_index(snapshot, device)]
    if at is None:
        return view_at_end(snapshot, dev, depth)
    moment = resolve_moment(snapshot, dev, str(at), lambda: allocated_curve(dev), flag)
    if moment.event < 0:  # no trace event to replay to: the snapshot's own state
        return view_at_end(snapshot, dev, depth)
    return view_at_event(snapshot, dev, moment.event, depth, moment=moment.name if moment.name != "event" else "")
