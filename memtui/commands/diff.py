"""memtui diff: what changed between two snapshots, devices, ranks or moments."""

from __future__ import annotations

from memtui.analysis.diff import MemoryDiff, MemoryView, diff_views, view_at_end, view_at_event
from memtui.commands._common import add_json_flag, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, check_depth, signed_bytes
from memtui.errors import UsageError
from memtui.model import Snapshot
from memtui.units import format_bytes

NAME = "diff"
HELP = ("Compare live memory by call site and segments by pool between two snapshots (or two devices, or two "
        "events of one trace); new and gone call sites, largest growth first.")


def add_arguments(parser) -> None:
    parser.add_argument("a", help="the 'before' snapshot")
    parser.add_argument("b", help="the 'after' snapshot (may be the same file, with --device-b or --at-b)")
    parser.add_argument("--device", type=int, default=None,
                        help="device of both sides (default: each side's own, as the explorer picks it)")
    parser.add_argument("--device-a", type=int, default=None, help="device of the first side")
    parser.add_argument("--device-b", type=int, default=None, help="device of the second side")
    parser.add_argument("--at-a", type=int, default=None, metavar="EVENT",
                        help="replay the first side to just after this event instead of the snapshot's end state")
    parser.add_argument("--at-b", type=int, default=None, metavar="EVENT", help="the same for the second side")
    parser.add_argument("--top", type=int, default=30, help="changed call sites to list (default 30)")
    parser.add_argument("--all", action="store_true", help="list unchanged call sites too")
    add_depth_option(parser)
    add_json_flag(parser)
    parser.add_argument("--tui", action="store_true", help="open the diff in the explorer instead of printing it")


def run(args) -> int:
    depth = check_depth(args.depth)
    if args.tui and args.json:
        raise UsageError("--tui and --json do not go together")
    a = load(args.a, args.model_cache)
    b = a if args.b == args.a else load(args.b, args.model_cache)
    view_a = side(a, _pick(args.device_a, args.device), args.at_a, depth)
    view_b = side(b, _pick(args.device_b, args.device), args.at_b, depth)
    result = diff_views(view_a, view_b)
    if args.tui:
        return args.front_ends.show_diff(result)
    if args.json:
        print_json(result.to_json())
    else:
        print("\n".join(render(result, max(args.top, 0), args.all)))
    return 0


def _pick(specific: int | None, both: int | None) -> int | None:
    return specific if specific is not None else both


def side(snapshot: Snapshot, device: int | None, at: int | None, depth: int) -> MemoryView:
    dev = snapshot.devices[device_or_error(snapshot, device)]
    if at is None:
        return view_at_end(snapshot, dev, depth)
    n = len(dev.trace)
    if not 0 <= at < n:
        raise UsageError(f"{snapshot.name} device {dev.device}: no event {at} (the trace has {n:,} events)")
    return view_at_event(snapshot, dev, at, depth)


def render(d: MemoryDiff, top: int = 30, show_all: bool = False) -> list[str]:
    f = format_bytes
    lines = [f"A: {d.a.name}", f"B: {d.b.name}", "",
             f"reserved   {f(d.a.reserved):>11} -> {f(d.b.reserved):>11}"
             f"  ({signed_bytes(d.b.reserved - d.a.reserved)})",
             f"allocated  {f(d.a.allocated):>11} -> {f(d.b.allocated):>11}"
             f"  ({signed_bytes(d.b.allocated - d.a.allocated)})", ""]
    for p in d.pools:
        lines.append(f"{p.pool:<22} segments {p.a.segments:>5} -> {p.b.segments:<5} reserved {f(p.a.reserved):>11} ->"
                     f" {f(p.b.reserved):<11} allocated {f(p.a.allocated):>11} -> {f(p.b.allocated)}")
    changed = [s for s in d.sites if show_all or s.status != "same"]
    lines.append("")
    if not changed:
        lines.append("no call site changed")
        return lines
    lines.append(f"{'change':>12} {'A':>11} {'B':>11} {'count':>11}  status   call site")
    # The largest growth and the largest shrink are both worth seeing: keep both ends.
    head, tail = changed, []
    if len(changed) > top:
        head, tail = changed[: top - top // 2], changed[len(changed) - top // 2:]
    for s in head:
        lines.append(_site_line(s))
    if tail or len(head) < len(changed):
        lines.append(f"{'...':>12}  ({len(changed) - len(head) - len(tail)} more; --top or --json for all)")
    for s in tail:
        lines.append(_site_line(s))
    return lines


def _site_line(s) -> str:
    f = format_bytes
    return (f"{signed_bytes(s.delta_bytes):>12} {f(s.bytes_a):>11} {f(s.bytes_b):>11}"
            f" {s.count_a:>5}->{s.count_b:<5}  {s.status:<7}  {s.site}")
