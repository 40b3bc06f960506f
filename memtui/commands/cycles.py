"""memtui cycles: memory that only the garbage collector gave back (reference cycles)."""

from __future__ import annotations

from memtui.analysis.cycles import CycleReport, find_cycles
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth
from memtui.units import format_bytes, format_seconds, plural

NAME = "cycles"
HELP = "Detect the reference-cycle sawtooth: allocations piling up over many iterations, freed in gc bursts."
BURSTS_SHOWN = 10


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    add_device_option(parser)
    add_depth_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    dev = snapshot.devices[device_or_error(snapshot, args.device)]
    report = find_cycles(snapshot, dev, check_depth(args.depth))
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(render(report)))
    return 0


def render(report: CycleReport) -> list[str]:
    f = format_bytes
    if not report.suspected:
        return [f"device {report.device}: no reference-cycle sawtooth (no burst of frees of memory made over"
                " many iterations)"]
    bursts = report.bursts
    held = max(b.bytes for b in bursts)
    if report.bounded:
        head = (f"device {report.device}: reference cycles suspected, bounded sawtooth:"
                f" {plural(len(bursts), 'garbage collection')} each freed up to {f(held)} that had piled up over"
                " many iterations")
    else:
        head = (f"device {report.device}: reference cycles suspected, unbounded: {f(held)} piled up over many"
                " iterations and came back only when the garbage collector ran"
                + (" (once)" if len(bursts) == 1 else " (and each burst freed more)"))
    lines = [head]
    for oom in report.ooms_while_accumulating:
        lines.append(f"  an OOM at event {oom['index']:,} struck while {f(oom['bytes'])}"
                     f" ({plural(oom['lives'], 'allocation')}) waited for the garbage collector")
    lines.append("")
    lines.append("call sites whose allocations the collector freed:")
    for s in report.sites:
        lines.append(f"  {f(s.bytes):>11} in {plural(s.lives, 'allocation')} over {plural(s.bursts, 'burst')},"
                     f" up to {s.rounds} {'steps' if report.rounds_by == 'steps' else 'rounds'} each  {s.site}")
    lines.append("")
    lines.append(f"{'event':>9} {'time':>10} {'freed':>11} {'lives':>6} {'peak before':>12} {'after':>11}"
                 "  order, collected at")
    for b in bursts[:BURSTS_SHOWN]:
        lines.append(f"{b.index:>9,} {format_seconds(report.seconds_into_trace(b)):>10} {f(b.bytes):>11}"
                     f" {b.lives:>6,} {f(b.allocated_before):>12}"
                     f" {f(b.allocated_after):>11}  {b.order}, {b.collected_at}")
    if len(bursts) > BURSTS_SHOWN:
        lines.append(f"... and {len(bursts) - BURSTS_SHOWN} more bursts (--json lists all)")
    lines.append("")
    lines.append("suggestion: call torch.utils.viz._cycles.warn_tensor_cycles() early in the program to be told"
                 " which objects form the cycles, then break them (weakref, del, clearing the attribute).")
    return lines
