"""memtui cycles: memory that only the garbage collector gave back (reference cycles)."""

from __future__ import annotations

from memtui.analysis.cycles import CANNOT_TELL, CYCLES, CycleReport, find_cycles
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth
from memtui.units import format_bytes, format_seconds, plural

NAME = "cycles"
HELP = ("Did reference cycles hold memory? Bursts of frees weighed on their stacks: the garbage collector,"
        " reference counting or an exception; a verdict with its confidence and evidence.")
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
    lines = [headline(report)]
    lines += because_lines(report)
    if report.alternatives:
        lines.append("also considered:")
        lines += [f"  - {a['verdict']}: {a['why']}" for a in report.alternatives]
    if report.sites:
        lines.append("")
        lines.append("call sites whose allocations the collector freed:")
        for s in report.sites:
            lines.append(f"  {f(s.bytes):>11} in {plural(s.lives, 'allocation')} over {plural(s.bursts, 'burst')}"
                         + (f", up to {s.rounds} steps each" if report.rounds_by == "steps" else "") + f"  {s.site}")
    if report.bursts:
        lines.append("")
        lines += burst_table(report, report.bursts, "order, collected at")
    if report.other_bursts:
        lines.append("")
        lines.append("bursts of frees with another cause (or none known):")
        lines += burst_table(report, report.other_bursts, "cause (confidence), freed at")
    if report.suspected:
        lines.append("")
        lines.append("suggestion: call torch.utils.viz._cycles.warn_tensor_cycles() early in the program to be told"
                     " which objects form the cycles, then break them (weakref, del, clearing the attribute).")
    return lines


def headline(report: CycleReport) -> str:
    """The verdict in one line: the device, the confidence and what the stacks recorded."""
    f = format_bytes
    how = f"{report.confidence} confidence; stacks recorded: {report.stacks}"
    if report.verdict == CYCLES:
        bursts = report.bursts
        held = max(b.bytes for b in bursts)
        if report.bounded:
            return (f"device {report.device}: reference cycles ({how}), bounded sawtooth:"
                    f" {plural(len(bursts), 'garbage collection')} each freed up to {f(held)} that had piled up")
        return (f"device {report.device}: reference cycles ({how}), unbounded: {f(held)} piled up and came back only"
                " when the garbage collector ran" + (" (once)" if len(bursts) == 1 else " (and each burst freed more)"))
    if report.verdict == CANNOT_TELL:
        return f"device {report.device}: cannot tell whether reference cycles held memory ({how})"
    return f"device {report.device}: no reference cycles ({how})"


def because_lines(report: CycleReport) -> list[str]:
    if not report.evidence:
        return []
    return ["because:"] + [f"  - {e.text}" for e in report.evidence]


def burst_table(report: CycleReport, bursts: list, last_column: str) -> list[str]:
    f = format_bytes
    lines = [f"{'event':>9} {'time':>10} {'freed':>11} {'lives':>6} {'peak before':>12} {'after':>11}  {last_column}"]
    for b in bursts[:BURSTS_SHOWN]:
        tail = (f"{b.order}, {b.collected_at}" if b.cause == "cycle"
                else f"{b.cause} ({b.confidence}), {b.collected_at}")
        lines.append(f"{b.index:>9,} {format_seconds(report.seconds_into_trace(b)):>10} {f(b.bytes):>11}"
                     f" {b.lives:>6,} {f(b.allocated_before):>12} {f(b.allocated_after):>11}  {tail}")
    if len(bursts) > BURSTS_SHOWN:
        lines.append(f"... and {len(bursts) - BURSTS_SHOWN} more bursts (--json lists all)")
    return lines
