"""Text layout shared by the analysis commands: options and call-site tables."""

from __future__ import annotations

import argparse

from memtui.commands._common import DEFAULT_DEVICE
from memtui.errors import UsageError
from memtui.units import format_bytes, parse_size


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


def signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


def site_lines(rows: list[dict], indent: str = "  ", bytes_key: str = "bytes", count_key: str = "count") -> list[str]:
    """``  1.00 GiB      3  file:line function`` for each row."""
    return [f"{indent}{format_bytes(r[bytes_key]):>11} {r[count_key]:>6}  {r['site']}" for r in rows]
