"""cycles: memory that only the garbage collector gave back (reference cycles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.analysis.cycles import CycleReport, find_cycles
from memtui.model import Snapshot
from memtui.report.cycles import cycles_report
from memtui.report.sections import Report
from memtui.services.common import depth_option, device_index, device_option, over_time

BURSTS_SHOWN = 10  # of each kind in the text; the JSON lists all


@dataclass(frozen=True)
class CyclesOptions:
    device: int | None = device_option()
    depth: int = depth_option()


@dataclass
class CyclesResult:
    cycles: CycleReport

    def to_json(self) -> dict[str, Any]:
        return self.cycles.to_json()

    def report(self) -> Report:
        return cycles_report(self.cycles, BURSTS_SHOWN)


def cycles(snapshot: Snapshot, options: CyclesOptions) -> CyclesResult:
    dev = over_time(snapshot.devices[device_index(snapshot, options.device)], "cycles")
    return CyclesResult(find_cycles(snapshot, dev, options.depth))
