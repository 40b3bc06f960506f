"""memtui diff: the generated command (memtui.services.diff), and --tui to browse the result."""

from __future__ import annotations

from memtui.commands import _common
from memtui.commands._analysis import add_spec_arguments, flags_named, print_result, spec_options
from memtui.commands._arguments import add_json_flag
from memtui.errors import UsageError
from memtui.services.catalog import spec

SPEC = spec("diff")
NAME = SPEC.name
HELP = SPEC.help


def add_arguments(parser) -> None:
    add_spec_arguments(parser, SPEC)
    add_json_flag(parser)
    parser.add_argument("--tui", action="store_true", help="open the diff in the explorer instead of printing it")


def run(args) -> int:
    options = spec_options(SPEC, args)
    if args.tui and args.json:
        raise UsageError("--tui and --json do not go together")
    a = _common.load(args.a, args.model_cache)
    b = a if args.b == args.a else _common.load(args.b, args.model_cache)
    with flags_named(SPEC):
        result = SPEC.service(a, b, options)
    if args.tui:
        return args.front_ends.show_diff(result.diff)
    print_result(result, args.json)
    return 0
