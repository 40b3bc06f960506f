"""whatif: the recording replayed under other allocator settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.analysis.whatif import ProgressFn, Scenario, WhatIf, what_if
from memtui.model import Snapshot
from memtui.report.sections import Lines, Report
from memtui.services.common import device_index, device_option
from memtui.services.options import OptionError, option
from memtui.units import format_bytes

MAX_SETTINGS = 20  # settings compared at once: each is a replay of the whole recording


def _check_settings(confs: list[str]) -> None:
    if len(confs) > MAX_SETTINGS:
        raise OptionError("conf", f"takes at most {MAX_SETTINGS} settings at once")


@dataclass(frozen=True)
class WhatIfOptions:
    conf: list[str] | None = option(None, "a PYTORCH_CUDA_ALLOC_CONF value to try, whole ('' or 'default': "
                                          "torch's defaults; e.g. 'expandable_segments:True'); several to compare "
                                          "(default: a set of useful candidates)", kind="text_list",
                                    optional=True, metavar="SETTINGS", check=_check_settings)
    cap: int | None = option(None, "the memory limit, as a per-process cap, as bytes or 80GiB (default: the one "
                                   "the recorded OOM implies, else none)", kind="size", optional=True,
                             metavar="BYTES")
    device: int | None = device_option()


@dataclass
class WhatIfResult:
    whatif: WhatIf

    def to_json(self) -> dict[str, Any]:
        return self.whatif.to_json()

    def report(self) -> Report:
        return Report("What if", [Lines("whatif", lines=text_lines(self.whatif))])


def whatif(snapshot: Snapshot, options: WhatIfOptions, progress: ProgressFn | None = None) -> WhatIfResult:
    device = device_index(snapshot, options.device)
    return WhatIfResult(what_if(snapshot, device, options.conf, options.cap, progress))


def fits_in(s: Scenario) -> str:
    """The smallest memory a setting fits in, as every view words it: with the lower cap that
    also fits where a cap between them runs out (``min_cap_lowest_bytes``)."""
    if s.min_cap_bytes is None:
        return "?"
    if s.min_cap_lowest_bytes is None:
        return format_bytes(s.min_cap_bytes)
    return f"{format_bytes(s.min_cap_bytes)} (also {format_bytes(s.min_cap_lowest_bytes)}, not between)"


def header_lines(w: WhatIf) -> list[str]:
    """The advice, then what the replays start from: the recorded settings and peak, the
    limit, where the trace starts, and how exactly the model reproduces the recording. The
    command and the explorer's What if screen both open with these lines."""
    f = format_bytes
    lines = [w.advice, ""]
    oom = f", OOM at event {w.recorded_oom:,}" if w.recorded_oom is not None else ""
    lines.append(f"device {w.device}: recorded with {w.recorded_settings or 'default'}, reserved peak"
                 f" {f(w.recorded_peak)}{oom}")
    limit = f"{f(w.limit.bytes)} ({w.limit.source})" if w.limit.bytes is not None else "none"  # not "none (none)"
    lines.append(f"limit: {limit}" + (f": {w.limit.note}" if w.limit.note else ""))
    if w.starts_mid_run:
        lines.append("the trace starts mid-run: every replay starts from the layout the recorded allocator had made by"
                     " its first event; a setting changes only what happens after")
    fid = w.fidelity
    if not fid.checked:
        lines.append(f"fidelity: not checked ({fid.note}); the figures below are the model's alone")
    elif fid.exact:
        lines.append(f"fidelity: exact (the replay under the recorded settings reproduces all {fid.segment_events:,}"
                     " segment events)")
    else:
        d = fid.first_difference or {}
        lines.append(f"fidelity: NOT exact: {fid.matched:,} of {fid.segment_events:,} segment events reproduced;"
                     f" first difference at event {d.get('event')}: recorded {d.get('recorded')}, simulated"
                     f" {d.get('simulated')}. The predictions below are not certain.")
    return lines


AFTER_THE_OOM = ("The recording ends at its OOM or goes on without that request: what a setting that serves it"
                 " would meet next is not recorded.")


def text_lines(w: WhatIf) -> list[str]:
    f = format_bytes
    lines = header_lines(w)
    lines.append("")
    width = max([44] + [len(s.settings or "default") + 11 for s in w.scenarios])
    header = f"{'settings':{width}} {'reserved peak':>14} {'runs out at':>12} {'recorded OOM':>13} {'fits in':>11}" \
             f" {'free at peak':>12}"
    lines.append(header)
    for s in w.scenarios:
        runs_out = f"{s.oom_event:,}" if s.oom_event is not None else "-"
        passes = {None: "-", True: "served", False: "not served"}[s.passes_recorded_oom]
        if not s.passes_certain:
            passes += "*"
        fits = f(s.min_cap_bytes) if s.min_cap_bytes is not None else "?"
        if s.min_cap_lowest_bytes is not None:
            fits += "~"
        name = (s.settings or "default") + (" (recorded)" if s.recorded else "")
        lines.append(f"{name:{width}} {f(s.reserved_peak):>14} {runs_out:>12} {passes:>13} {fits:>11}"
                     f" {f(s.fragmentation_at_peak):>12}")
    if any(not s.passes_certain for s in w.scenarios):
        lines.append("* depends on the cap: the answer differs at the two ends of what the recording allows")
    for s in w.scenarios:
        if s.min_cap_lowest_bytes is not None and s.min_cap_bytes is not None:
            lines.append(f"~ {s.settings or 'default'}: also fits in {f(s.min_cap_lowest_bytes)}, but runs out under"
                         f" some cap between that and {f(s.min_cap_bytes)}: under a lower cap the allocator frees its"
                         " cache at other moments, and the layout that follows can fit where a higher cap's does not")
    if w.recorded_oom is not None:
        lines.append("")
        lines.append(AFTER_THE_OOM)
    return lines
