"""memtui diff: what changed between two snapshots, devices, ranks or moments."""

from __future__ import annotations

from memtui.analysis.diff import MemoryView, diff_views, view_at_end, view_at_event
from memtui.commands._common import add_json_flag, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, check_depth, print_report
from memtui.errors import UsageError
from memtui.model import Snapshot
from memtui.report.diff import diff_report

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
        print_report(diff_report(result, max(args.top, 0), args.all))
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
