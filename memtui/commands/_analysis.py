"""The command of an analysis, made from its spec (memtui.services.catalog).

Every spec becomes ``memtui NAME``: its options become flags (bounds checked by the
service layer, so the command line accepts what the other front ends accept), the
snapshot(s) it reads become positional arguments, and ``--json`` prints the result's JSON
where the text is its report. A module of its own in ``memtui.commands`` with the spec's
name replaces the generated command (``diff`` and ``ranks`` add flags of the command
line's own); it builds on :func:`add_spec_arguments` and :func:`spec_options`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memtui.commands import _common
from memtui.commands._arguments import add_json_flag, add_snapshot_argument
from memtui.commands._common import StderrProgress, print_json
from memtui.errors import printable
from memtui.report.text import text_lines
from memtui.services.options import Option, OptionError, checked
from memtui.services.spec import AnalysisSpec


def add_spec_arguments(parser: argparse.ArgumentParser, spec: AnalysisSpec) -> None:
    """The snapshot argument(s) and every option the spec offers the command line."""
    if spec.subject == "snapshot":
        add_snapshot_argument(parser)
    elif spec.subject == "pair":
        parser.add_argument("a", help="the 'before' snapshot")
        parser.add_argument("b", help="the 'after' snapshot (may be the same file, with --device-b or --at-b)")
    else:
        parser.add_argument("inputs", nargs="+", metavar="FILE|DIR", help="rank snapshots, or a directory of them")
    for opt in spec.option_list("cli"):
        add_option(parser, opt)


def add_option(parser: argparse.ArgumentParser, opt: Option) -> None:
    help = opt.help
    if opt.positional:
        parser.add_argument(opt.name, help=help)
        return
    flag = opt.cli_flag
    if opt.kind == "bool":
        parser.add_argument(flag, dest=opt.name, action="store_true", help=help)
    elif opt.kind == "choice":
        parser.add_argument(flag, dest=opt.name, choices=opt.choices, default=opt.default, help=help)
    elif opt.kind == "text_list":
        parser.add_argument(flag, dest=opt.name, action="append", default=opt.default, metavar=opt.metavar, help=help)
    else:
        kind: Any = {"int": int, "float": float}.get(opt.kind, str)
        parser.add_argument(flag, dest=opt.name, type=kind, default=opt.default, metavar=opt.metavar, help=help)


def spec_options(spec: AnalysisSpec, args: argparse.Namespace) -> Any:
    """The spec's options from the parsed arguments, checked; a refused value is named by its flag."""
    with flags_named(spec):
        return checked(spec.options, {o.name: getattr(args, o.name) for o in spec.option_list("cli")})


class flags_named:
    """Within it, an :class:`OptionError` names the option as the command line spells it."""

    def __init__(self, spec: AnalysisSpec) -> None:
        self.flags = {o.name: o.cli_flag for o in spec.option_list()}

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if isinstance(exc, OptionError) and exc.name in self.flags:
            raise exc.spelled(self.flags[exc.name]) from None
        return False


def print_result(result: Any, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json())
        return
    if hasattr(result, "lines"):  # a long result (a whole trace) gives its text a line at a time
        for line in result.lines():
            print(line)
    else:
        # File names (rank files found by a glob) reach the lines: escape what a terminal would obey.
        print("\n".join(printable(line) for line in text_lines(result.report())))


class SpecCommand:
    """``memtui NAME`` for an analysis that reads one snapshot (or two), as the command modules are."""

    def __init__(self, spec: AnalysisSpec) -> None:
        self.spec = spec
        self.NAME = spec.name
        self.HELP = spec.help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_spec_arguments(parser, self.spec)
        add_json_flag(parser)

    def run(self, args: argparse.Namespace) -> int:
        options = spec_options(self.spec, args)  # before the file is read
        with flags_named(self.spec):
            if self.spec.subject == "pair":
                a = _common.load(args.a, args.model_cache)
                b = a if args.b == args.a else _common.load(args.b, args.model_cache)
                result = self.spec.service(a, b, options)
            else:
                snapshot = _common.load(args.snapshot, args.model_cache)
                result = self._with_progress(snapshot, options)
        print_result(result, args.json)
        return 0

    def _with_progress(self, snapshot, options) -> Any:
        if not (self.spec.reports_progress and sys.stderr.isatty()):
            return self.spec.service(snapshot, options)
        try:
            return self.spec.service(snapshot, options, progress=StderrProgress())
        finally:
            sys.stderr.write("\r\x1b[2K")  # the progress line, before the result or an error
