"""One snapshot per rank, side by side: a row per rank, the reference rank and the outliers,
the call sites where ranks differ, and for many ranks the histogram of peaks and the
outlier groups."""

from __future__ import annotations

from typing import Any

from memtui.report.format import signed_bytes
from memtui.report.sections import AnySection, Column, Lines, Place, Report, Table
from memtui.units import format_bytes, plural

FULL_TABLE_RANKS = 64  # above this, the table lists only the outliers and the median rank
OUTLIERS_LISTED = 20  # one line each, with reasons; the groups say the rest
SITES_SHOWN = 15
BAR_WIDTH = 40
RANK_COLUMNS = (Column("rank", "text"), Column("peak_allocated", "bytes", "peak allocated"),
                Column("peak_reserved", "bytes", "peak reserved"), Column("reserved", "bytes"),
                Column("ooms", "count", "OOMs"), Column("events", "count"), Column("outlier", "text"),
                Column("group", "text"), Column("mark", "text"), Column("file", "location"))
RANK_HEADING = f"{'rank':>5} {'peak alloc':>11} {'peak resv':>11} {'reserved':>11} {'OOMs':>5} {'events':>10}  file"


def ranks_report(result: dict[str, Any], moment: str = "peak", groups: list[dict[str, Any]] | None = None,
                 histogram: list[dict[str, Any]] | None = None, limit: int | None = None) -> Report:
    """:func:`memtui.analysis.ranks.compare_ranks`'s result as sections: the table ``ranks``
    (past ``limit`` ranks only the outliers and the median rank), ``failed``, ``verdict``
    (the reference rank and the outliers), the table ``divergent``, and with the groups and
    the histogram of :mod:`memtui.analysis.rank_overview`, ``histogram`` and ``groups``."""
    shown, rows_left_out, outliers_left_out = shortened(result, limit) if limit is not None else (result, 0, 0)
    table = rank_table(shown["ranks"], groups)
    table.left_out = rows_left_out
    sections: list[AnySection] = [table, Lines("failed", lines=[f"failed: {x['error']}" for x in result["failed"]])]
    if shown["ranks"]:
        sections += [verdict_lines(shown, outliers_left_out), divergent_table(result["divergent_sites"], moment)]
    sections += [Lines("histogram", space=True, lines=histogram_lines(histogram or [], len(result["ranks"]))),
                 Lines("groups", space=True, lines=group_lines(groups or []))]
    return Report("Ranks", sections)


def rank_table(ranks: list[dict[str, Any]], groups: list[dict[str, Any]] | None = None) -> Table:
    """A row per rank; ``group``: the number of its outlier group, when ``groups`` are given."""
    group_of = {rank: i + 1 for i, g in enumerate(groups or []) for rank in g["ranks"]}
    rows = [(r["rank"], r["peak_allocated"], r["peak_reserved"], r["reserved"], r["ooms"], r["events"],
             "outlier" if r["outlier"] else "", f"outlier {group_of[r['rank']]}" if r["rank"] in group_of else "",
             "  <- outlier" if r["outlier"] else "", Place(r["file"])) for r in ranks]
    return Table("ranks", columns=RANK_COLUMNS, rows=rows, heading=RANK_HEADING, when_empty=[RANK_HEADING],
                 line="{rank:>5} {peak_allocated:>11} {peak_reserved:>11} {reserved:>11} {ooms:>5} {events:>10,}"
                      "  {file}{mark}",
                 more="  ... {n:,} more ranks not listed (--json lists all, --tui browses them)")


def verdict_lines(result: dict[str, Any], outliers_left_out: int = 0) -> Lines:
    lines = [f"reference: rank {result['reference_rank']}, the median peak allocated"
             f" ({format_bytes(result['median_peak_allocated'])})"]
    if not result["outliers"]:
        lines.append("no outlier rank")
    lines += [f"outlier: rank {o['rank']}: " + "; ".join(o["reasons"]) for o in result["outliers"]]
    if outliers_left_out:
        lines.append(f"... and {outliers_left_out:,} more outlier ranks (grouped below)")
    return Lines("verdict", space=True, lines=lines)


def divergent_table(divergent: list[dict[str, Any]], moment: str) -> Table:
    return Table("divergent", space=True,
                 columns=(Column("rank", "text"), Column("delta", "delta"), Column("bytes", "bytes"),
                          Column("typical", "bytes"), Column("site", "location", "call site")),
                 rows=[(d["rank"], d["delta"], d["bytes"], d["typical"], Place(d["site"])) for d in divergent],
                 title=f"call sites that differ from the ranks' median (at each rank's {moment}):",
                 line="  rank {rank:>4} {delta:>12} ({bytes} vs {typical})  {site}",
                 limit=SITES_SHOWN, more="  ... and {n} more (--json lists all)")


def shortened(result: dict[str, Any], limit: int = FULL_TABLE_RANKS) -> tuple[dict[str, Any], int, int]:
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


def histogram_lines(histogram: list[dict[str, Any]], total: int) -> list[str]:
    """A bar per bin; a run of empty bins is one line, so a lone outlier far off stays short."""
    if not histogram:
        return []
    lines = [f"peak allocated over {plural(total, 'rank')}:"]
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


def group_lines(groups: list[dict[str, Any]]) -> list[str]:
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


def rank_ranges(ranks: list[int], limit: int = 12) -> str:
    """``0-3, 7, 9-12``; past ``limit`` pieces, ``... (N ranks)``."""
    pieces: list[str] = []
    ordered = sorted(ranks)
    start = prev = None
    for r in ordered + [None]:
        if r is not None and prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            pieces.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    if len(pieces) > limit:
        return ", ".join(pieces[:limit]) + f", ... ({len(ordered)} ranks)"
    return ", ".join(pieces)
