"""memtui export: write the events that match a filter to a msgpack file."""

from __future__ import annotations

import sys

from memtui.atomic import check_writable_target
from memtui.commands._arguments import add_snapshot_argument
from memtui.commands._common import StderrProgress, load
from memtui.errors import printable
from memtui.export.writer import export_snapshot
from memtui.query import compile_filter
from memtui.units import format_bytes

NAME = "export"
HELP = ("Write the events matching a filter (docs/filter.md) with the snapshot's segments, blocks and the "
        "stacks they use to a msgpack file (docs/export-format.md) that memtui reopens.")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--filter", "-f", default="", metavar="EXPR",
                        help="filter expression, e.g. 'size>1MiB file:train.py leaked' (default: every event)")
    parser.add_argument("--device", type=int, default=None, help="only this device (default: all)")
    parser.add_argument("--no-stacks", action="store_true", help="leave out stacks and frames (a smaller file)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.msgpack", help="file to write")
    parser.add_argument("--force", action="store_true", help="overwrite OUT if it exists")


def run(args) -> int:
    # Everything that can be refused is refused before the (possibly long) load.
    compile_filter(args.filter)
    check_writable_target(args.output, args.force, source=args.snapshot)
    snapshot = load(args.snapshot, args.model_cache)
    progress = StderrProgress() if sys.stderr.isatty() else None
    result = export_snapshot(snapshot, args.output, args.filter, args.device, include_stacks=not args.no_stacks,
                             force=args.force, progress=progress)
    if progress is not None:
        sys.stderr.write("\r\x1b[2K")
    devices = ", ".join(str(d) for d in result.devices)
    print(f"wrote {printable(str(result.path))}: {result.events:,} of {result.source_events:,} events "
          f"(device{'s' if len(result.devices) != 1 else ''} {devices}), {format_bytes(result.bytes)}")
    return 0
