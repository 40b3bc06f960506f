"""memtui check: consistency findings about a snapshot file."""

from __future__ import annotations

from memtui.commands._arguments import add_json_flag, add_snapshot_argument
from memtui.commands._common import load, print_json
from memtui.model.checks import check_snapshot

NAME = "check"
HELP = ("List what a snapshot holds that its figures depend on: warnings (replaced values, contradictions, escaped"
        " strings) and notes (a trace that starts mid-run).")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when there is any warning (notes do not count)")
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache, warnings_listed=True)
    findings = check_snapshot(snapshot)
    if args.json:
        print_json([f.as_dict() for f in findings])
    elif not findings:
        print(f"{snapshot.name}: no problems found")
    else:
        for f in findings:
            where = f"device {f.device}: " if f.device is not None else ""
            print(f"{f.level}: {where}{f.message}")
    warnings = sum(f.level == "warning" for f in findings)
    return 1 if args.strict and warnings else 0
