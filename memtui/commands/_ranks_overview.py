"""Text for many ranks: a shortened table, the histogram of peaks, the outlier groups."""

from __future__ import annotations

from memtui.analysis.rank_overview import rank_ranges
from memtui.commands._report import signed_bytes
from memtui.units import format_bytes

FULL_TABLE_RANKS = 64  # above this, the table lists only the outliers and the median rank
OUTLIERS_LISTED = 20  # one line each, with reasons; the groups say the rest
BAR_WIDTH = 40


def shortened(result: dict, limit: int = FULL_TABLE_RANKS) -> tuple[dict, int, int]:
    """``result`` with only the rows worth reading when there are many ranks: the median
    rank and up to ``limit`` outliers (the groups cover every outlier). Also says how many
    table rows and outlier lines were left out."""
    rows = result["ranks"]
    if len(rows) <= limit:
        return result, 0, 0
    outliers = [r for r in rows if r["outlier"]]
    kept_ranks = {r["rank"] for r in outliers[:limit]} | {result["reference_rank"]}
    kept = [r for r in rows if r["rank"] in kept_ranks]
    listed = result["outliers"][:OUTLIERS_LISTED]
    return ({**result, "ranks": kept, "outliers": listed}, len(rows) - len(kept),
            len(result["outliers"]) - len(listed))


def histogram_lines(histogram: list[dict], total: int) -> list[str]:
    """A bar per bin; a run of empty bins is one line, so a lone outlier far off stays short."""
    if not histogram:
        return []
    lines = [f"peak allocated over {total:,} ranks:"]
    most = max(b["count"] for b in histogram)
    i = 0
    while i < len(histogram):
        b = histogram[i]
        empty_run = i
        while empty_run < len(histogram) and histogram[empty_run]["count"] == 0:
            empty_run += 1
        if empty_run - i >= 2:
            gap = f"{format_bytes(b['low'])} - {format_bytes(histogram[empty_run - 1]['high'])}"
            lines.append(f"  {gap:>25} {'·' * 3:<{BAR_WIDTH}} {0:>6}")
            i = empty_run
            continue
        filled = 0 if not b["count"] else max(1, round(BAR_WIDTH * b["count"] / most))
        span = f"{format_bytes(b['low'])} - {format_bytes(b['high'])}" if b["high"] != b["low"] else \
            format_bytes(b["low"])
        note = f"  outliers: {rank_ranges(b['outliers'], limit=6)}" if b["outliers"] else ""
        lines.append(f"  {span:>25} {'█' * filled:<{BAR_WIDTH}} {b['count']:>6,}{note}")
        i += 1
    return lines


def group_lines(groups: list[dict]) -> list[str]:
    if not groups:
        return []
    lines = ["outlier ranks, grouped by how they differ:"]
    for g in groups:
        noun = "rank" if g["count"] == 1 else "ranks"
        lines.append(f"  {g['count']:>5} {noun} ({rank_ranges(g['ranks'])}): {g['difference']}")
        for s in g["sites"][:5]:
            delta = signed_bytes(s["delta_min"]) if s["delta_min"] == s["delta_max"] else \
                f"{signed_bytes(s['delta_min'])} to {signed_bytes(s['delta_max'])}"
            lines.append(f"        {delta:>24}  {s['site']}")
    return lines
