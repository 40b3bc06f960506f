"""oom: why each OOM of a device happened, with the evidence, and who held the memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memtui.analysis.oom import OomDiagnosis, diagnose_ooms
from memtui.analysis.trace_evidence import NO_TRACE, has_trace
from memtui.model import Snapshot
from memtui.model.snapshot import NOT_REPLAYED
from memtui.report.oom import diagnosis_sections, oom_report
from memtui.report.sections import Lines, Report
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
    # The OOMs of a filtered export, by the source's event numbers: not explained, as the state
    # at them is not in the file (NOT_REPLAYED).
    not_replayed: list[int] = field(default_factory=list)
    # With no OOM on this device: the first other device that has one, and its first OOM's event.
    elsewhere: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": self.device, "ooms": [d.to_json() for d in self.ooms]}
        if self.elsewhere is not None:
            out["oom_on_other_device"] = {"device": self.elsewhere[0], "event": self.elsewhere[1]}
        if self.not_replayed:
            out["not_replayed"] = {"events": self.not_replayed, "reason": NOT_REPLAYED}
        return out

    def report(self) -> Report:
        if self.not_replayed:
            events = ", ".join(f"{i:,}" for i in self.not_replayed)
            return Report("Why OOM", [Lines(lines=[
                f"device {self.device}: OOM at event {events}: cannot tell why", f"  {NOT_REPLAYED};"
                " explain it on the source snapshot"])])
        return oom_report(self.device, self.ooms, LARGEST_SHOWN, self.no_trace_reason, self.elsewhere)


def oom(snapshot: Snapshot, options: OomOptions) -> OomResult:
    device = device_index(snapshot, options.device)
    found = diagnose_ooms(snapshot, device, options.device_memory, options.depth, options.top)
    dev = snapshot.devices[device] if snapshot.devices else None
    traced = dev is None or has_trace(dev)
    not_replayed = [dev.shown_index(int(i)) for i in dev.oom_indices()] if dev is not None and dev.partial_trace else []
    elsewhere = snapshot.oom_elsewhere(device) if not found and not not_replayed else None
    if elsewhere is not None:  # its event as that device's views number it
        elsewhere = (elsewhere[0], snapshot.devices[elsewhere[0]].shown_index(elsewhere[1]))
    return OomResult(device, found, None if traced else NO_TRACE, not_replayed, elsewhere)


def render(d: OomDiagnosis, n: int = 1, total: int = 1) -> list[str]:
    """The report of one OOM as text."""
    return text_lines(Report("", diagnosis_sections(d, n, total, LARGEST_SHOWN)))
