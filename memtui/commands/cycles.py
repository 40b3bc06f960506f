"""memtui cycles: memory that only the garbage collector gave back (reference cycles)."""

from __future__ import annotations

from memtui.analysis.cycles import find_cycles
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth, print_report
from memtui.report.cycles import cycles_report

NAME = "cycles"
HELP = ("Did reference cycles hold memory? Bursts of frees weighed on their stacks: the garbage collector,"
        " reference counting or an exception; a verdict with its confidence and evidence.")
BURSTS_SHOWN = 10  # of each kind; --json lists all


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
        print_report(cycles_report(report, BURSTS_SHOWN))
    return 0
