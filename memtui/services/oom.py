"""oom: why each OOM of a device happened, with the evidence, and who held the memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.analysis.oom import OomDiagnosis, diagnose_ooms
from memtui.analysis.trace_evidence import NO_TRACE, has_trace
from memtui.model import Snapshot
from memtui.report.oom import diagnosis_sections, oom_report
from memtui.report.sections import Report
from memtui.report.text import text_lines
from memtui.services.common import depth_option, device_index, device_option, top_option
from memtui.services.options import option

LARGEST_SHOWN = 5  # live allocations in the text, past the call sites


@dataclass(frozen=True)
class OomOptions:
    device: int | None = device_option()
    device_memory: int | None = option(None, "the GPU's total memory, as bytes or 80GiB; estimated from common "
                                             "GPUs when not given", kind="size", optional=True, metavar="SIZE")
    top: int = top_option(10, "call sites and allocations to list per OOM (default 10)")
    depth: int = depth_option()


@dataclass
class OomResult:
    device: int
    ooms: list[OomDiagnosis]
    no_trace_reason: str | None = None  # why the file could not show an OOM, when it has no trace

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "ooms": [d.to_json() for d in self.ooms]}

    def report(self) -> Report:
        return oom_report(self.device, self.ooms, LARGEST_SHOWN, self.no_trace_reason)


def oom(snapshot: Snapshot, options: OomOptions) -> OomResult:
    device = device_index(snapshot, options.device)
    found = diagnose_ooms(snapshot, device, options.device_memory, options.depth, options.top)
    traced = not snapshot.devices or has_trace(snapshot.devices[device])
    return OomResult(device, found, None if traced else NO_TRACE)


def render(d: OomDiagnosis, n: int = 1, total: int = 1) -> list[str]:
    """The report of one OOM as text."""
    return text_lines(Report("", diagnosis_sections(d, n, total, LARGEST_SHOWN)))
