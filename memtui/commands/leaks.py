"""memtui leaks: live memory by call site and what grew over the run."""

from __future__ import annotations

from memtui.analysis.leaks import find_leaks
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth, print_report
from memtui.report.leaks import describe_points as describe_points  # memtui.mcp takes it from here
from memtui.report.leaks import leaks_report

NAME = "leaks"
HELP = ("Group live allocations by call site; a verdict (leak, growth that plateaus or is given back) with its"
        " evidence, and the sites whose kept memory grows all through the run.")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    add_device_option(parser)
    add_depth_option(parser)
    parser.add_argument("--windows", type=int, default=10,
                        help="time windows to sample when no step annotations mark iterations (default 10)")
    parser.add_argument("--points", type=int, default=24, help="at most this many sample points (default 24)")
    parser.add_argument("--top", type=int, default=20, help="call sites to list besides growing ones (default 20)")
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    dev = snapshot.devices[device_or_error(snapshot, args.device)]
    report = find_leaks(snapshot, dev, check_depth(args.depth), max(args.points, 2), max(args.windows, 2),
                        max(args.top, 0))
    if args.json:
        print_json(report.to_json())
    else:
        print_report(leaks_report(report))
    return 0
