"""memtui ranks: one snapshot per rank, side by side; which rank is not like the others."""

from __future__ import annotations

import sys
import time

from memtui.analysis.rank_files import default_workers, find_rank_files, summarize_files
from memtui.analysis.ranks import compare_ranks
from memtui.commands._common import add_json_flag, print_json
from memtui.commands._report import add_depth_option, check_depth, signed_bytes
from memtui.errors import UsageError
from memtui.units import format_bytes

NAME = "ranks"
HELP = ("Compare one snapshot per rank (files or a directory): peak allocated, reserved, OOMs, events, and the "
        "call sites where a rank differs from the median rank; flags the outlier rank.")
SITES_SHOWN = 15


def add_arguments(parser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="FILE|DIR", help="rank snapshots, or a directory of them")
    parser.add_argument("--workers", type=int, default=None,
                        help=f"worker processes (default: one per core, here {default_workers()})")
    parser.add_argument("--at", choices=("peak", "end"), default="peak",
                        help="compare call sites at each rank's peak (default) or at snapshot time")
    add_depth_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    files = find_rank_files(args.inputs)
    progress = ProgressLine() if sys.stderr.isatty() else None
    summaries = summarize_files(files, args.workers, check_depth(args.depth), progress)
    if progress:
        progress.clear()
    result = compare_ranks(summaries, args.at)
    if args.json:
        print_json(result)
    else:
        print("\n".join(render(result, args.at)))
    if not result["ranks"]:
        raise UsageError("no rank file could be read")
    return 0


class ProgressLine:
    """``ranks: 12/64 files (1 failed)`` on stderr, redrawn at most ten times a second."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        width = 24
        filled = width * done // max(total, 1)
        failures = f" ({failed} failed)" if failed else ""
        sys.stderr.write(f"\r\x1b[2Kranks [{'#' * filled}{'.' * (width - filled)}] {done}/{total} files{failures}")
        sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def render(result: dict, moment: str = "peak") -> list[str]:
    f = format_bytes
    lines = [f"{'rank':>5} {'peak alloc':>11} {'peak resv':>11} {'reserved':>11} {'OOMs':>5} {'events':>10}  file"]
    for r in result["ranks"]:
        mark = "  <- outlier" if r["outlier"] else ""
        lines.append(f"{r['rank']:>5} {f(r['peak_allocated']):>11} {f(r['peak_reserved']):>11} {f(r['reserved']):>11}"
                     f" {r['ooms']:>5} {r['events']:>10,}  {r['file']}{mark}")
    for failure in result["failed"]:
        lines.append(f"failed: {failure['error']}")
    if not result["ranks"]:
        return lines
    lines.append("")
    lines.append(f"reference: rank {result['reference_rank']}, the median peak allocated"
                 f" ({f(result['median_peak_allocated'])})")
    if not result["outliers"]:
        lines.append("no outlier rank")
    for o in result["outliers"]:
        lines.append(f"outlier: rank {o['rank']}: " + "; ".join(o["reasons"]))
    divergent = result["divergent_sites"]
    if divergent:
        lines.append("")
        lines.append(f"call sites that differ from the median rank (at each rank's {moment}):")
        for d in divergent[:SITES_SHOWN]:
            lines.append(f"  rank {d['rank']:>4} {signed_bytes(d['delta']):>12} ({f(d['bytes'])} vs {f(d['typical'])})"
                         f"  {d['site']}")
        if len(divergent) > SITES_SHOWN:
            lines.append(f"  ... and {len(divergent) - SITES_SHOWN} more (--json lists all)")
    return lines
