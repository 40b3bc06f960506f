"""Options shared by the analysis commands (their reports are memtui.report's)."""

from __future__ import annotations

import argparse

from memtui.commands._common import DEFAULT_DEVICE
from memtui.errors import UsageError, printable
from memtui.report.format import signed_bytes as signed_bytes  # memtui.mcp takes it from here
from memtui.report.sections import Report
from memtui.report.text import text_lines
from memtui.units import parse_size


def add_depth_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--depth", type=int, default=1,
                        help="user frames that make a call site (default 1: the deepest user frame)")


def add_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=int, default=None, help=f"device (default: {DEFAULT_DEVICE})")


def size_argument(text: str) -> int:
    value = parse_size(text)
    if value is None or value <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 80GiB or 85899345920)")
    return value


def check_depth(depth: int) -> int:
    if depth < 1:
        raise UsageError("--depth must be at least 1")
    return depth


def print_report(report: Report) -> None:
    # File names (rank files found by a glob) reach the lines: escape what a terminal would obey.
    print("\n".join(printable(line) for line in text_lines(report)))
