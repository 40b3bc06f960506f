"""memtui whatif: the recording replayed under other allocator settings."""

from __future__ import annotations

import sys

from memtui.analysis.whatif import WhatIf, what_if
from memtui.commands._common import (
    StderrProgress,
    add_json_flag,
    add_snapshot_argument,
    device_or_error,
    load,
    print_json,
)
from memtui.commands._report import add_device_option, size_argument
from memtui.units import format_bytes

NAME = "whatif"
HELP = ("Replay the recording through a model of PyTorch's caching allocator under other PYTORCH_CUDA_ALLOC_CONF"
        " settings: reserved peak, whether and where it runs out, the smallest memory it fits in.")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--conf", action="append", metavar="SETTINGS",
                        help="one whole PYTORCH_CUDA_ALLOC_CONF value ('' or 'default': torch's defaults);"
                             " repeat to compare several (default: a set of useful candidates)")
    parser.add_argument("--cap", type=size_argument, default=None, metavar="BYTES",
                        help="the memory limit, as a per-process cap (default: the one the recorded OOM implies,"
                             " else none)")
    add_device_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    device = device_or_error(snapshot, args.device)
    progress = StderrProgress() if sys.stderr.isatty() else None
    result = what_if(snapshot, device, args.conf, args.cap, progress)
    if progress is not None:
        sys.stderr.write("\r\x1b[2K")
    if args.json:
        print_json(result.to_json())
        return 0
    for line in text_lines(result):
        print(line)
    return 0


def text_lines(w: WhatIf) -> list[str]:
    f = format_bytes
    lines = [w.advice, ""]
    oom = f", OOM at event {w.recorded_oom:,}" if w.recorded_oom is not None else ""
    lines.append(f"device {w.device}: recorded with {w.recorded_settings or 'default'}, reserved peak"
                 f" {f(w.recorded_peak)}{oom}")
    lines.append(f"limit: {f(w.limit.bytes) if w.limit.bytes is not None else 'none'} ({w.limit.source})"
                 + (f": {w.limit.note}" if w.limit.note else ""))
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
        name = (s.settings or "default") + (" (recorded)" if s.recorded else "")
        lines.append(f"{name:{width}} {f(s.reserved_peak):>14} {runs_out:>12} {passes:>13} {fits:>11}"
                     f" {f(s.fragmentation_at_peak):>12}")
    if any(not s.passes_certain for s in w.scenarios):
        lines.append("* depends on the cap: the answer differs at the two ends of what the recording allows")
    if w.recorded_oom is not None:
        lines.append("")
        lines.append("The recording ends at its OOM or goes on without that request: what a setting that serves it"
                     " would meet next is not recorded.")
    return lines
