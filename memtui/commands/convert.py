"""memtui convert: any snapshot memtui reads → torch's pickle (for memory_viz) or JSON."""

from __future__ import annotations

import os
import sys

from memtui.atomic import check_writable_target
from memtui.commands._common import StderrProgress
from memtui.errors import printable
from memtui.export.convert import convert_file, output_format
from memtui.units import format_bytes

NAME = "convert"
HELP = ("Convert a snapshot (pickle, compressed pickle or memtui .msgpack export) to a protocol-4 pickle "
        "that torch's _memory_viz and pytorch.org/memory_viz open, or to JSON; the format follows OUT's extension.")


def add_arguments(parser) -> None:
    parser.add_argument("input", help="snapshot file or memtui export")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.pickle|OUT.json", help="file to write")
    parser.add_argument("--force", action="store_true", help="overwrite OUT if it exists")


def run(args) -> int:
    output_format(args.output)
    check_writable_target(args.output, args.force, source=args.input)
    progress = StderrProgress() if sys.stderr.isatty() else None
    kind = convert_file(args.input, args.output, args.force, progress)
    if progress is not None:
        sys.stderr.write("\r\x1b[2K")
    print(f"wrote {printable(args.output)} ({kind}, {format_bytes(os.path.getsize(args.output))})")
    return 0
