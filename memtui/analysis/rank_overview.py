"""Many ranks at a glance: outlier ranks grouped by how they differ, and peaks as a histogram.

Both work on the result of :func:`memtui.analysis.ranks.compare_ranks` alone. With
thousands of ranks a list of outliers is as unreadable as the table: eight ranks that
ran out of memory at the same call site are one finding, so ranks whose peak is off
in the same direction, that ran out of memory alike and whose diverging call sites are
the same (each moved the same way) form one group.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from memtui.units import format_bytes

HISTOGRAM_BINS = 12
# How an outlier differs: peak allocated higher or lower (or None), an OOM, and the call
# sites (text, 'more' or 'less') it diverges at.
Difference = tuple[str | None, bool, tuple[tuple[str, str], ...]]


def group_outliers(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per kind of difference: the ranks, what sets them apart, their peaks.

    Groups with OOMs come first, then larger groups before smaller ones."""
    rows = {r["rank"]: r for r in result["ranks"]}
    sites_of: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for d in result["divergent_sites"]:
        sites_of[d["rank"]].append(d)
    groups: dict[Difference, list[dict[str, Any]]] = defaultdict(list)
    for outlier in result["outliers"]:
        rank = outlier["rank"]
        groups[_difference(outlier, rows[rank], result, sites_of[rank])].append(outlier)
    out = []
    for (peak, oom, sites), members in groups.items():
        ranks = [m["rank"] for m in members]
        peaks = [rows[r]["peak_allocated"] for r in ranks]
        site_deltas = [[d["delta"] for r in ranks for d in sites_of[r] if d["site"] == site] for site, _ in sites]
        out.append({
            "ranks": ranks,
            "count": len(ranks),
            "peak": peak,
            "oom": oom,
            "sites": [{"site": site, "direction": sign, "delta_min": min(deltas), "delta_max": max(deltas)}
                      for (site, sign), deltas in zip(sites, site_deltas)],
            "peak_allocated_min": min(peaks),
            "peak_allocated_max": max(peaks),
            "difference": _describe(peak, oom, sites, result["median_peak_allocated"], peaks),
        })
    out.sort(key=lambda g: (not g["oom"], -g["count"], g["ranks"][0]))
    return out


def _difference(outlier: dict[str, Any], row: dict[str, Any], result: dict[str, Any],
                divergent: list[dict[str, Any]]) -> Difference:
    reasons = outlier["reasons"]
    peak: str | None = None
    if any(r.startswith("peak allocated") for r in reasons):
        peak = "higher" if row["peak_allocated"] >= result["median_peak_allocated"] else "lower"
    oom = any("OOM" in r for r in reasons)
    mentions_sites = any("call site" in r for r in reasons)
    sites = tuple(sorted({(d["site"], "more" if d["delta"] > 0 else "less") for d in divergent})) \
        if mentions_sites else ()
    return peak, oom, sites


def _describe(peak: str | None, oom: bool, sites: tuple[tuple[str, str], ...], median: int, peaks: list[int]) -> str:
    parts = []
    if peak is not None:
        scale = 100 / median if median else 0.0
        low, high = (min(peaks) - median) * scale, (max(peaks) - median) * scale
        share = f"{low:+.0f}%" if round(low) == round(high) else f"{low:+.0f}% to {high:+.0f}%"
        parts.append(f"peak allocated {peak} ({share})")
    if oom:
        parts.append("ran out of memory")
    for site, sign in sites[:3]:
        parts.append(f"{sign} at {site}")
    if len(sites) > 3:
        parts.append(f"{len(sites) - 3} more call sites")
    return "; ".join(parts) or "differs"


def peak_histogram(result: dict[str, Any], bins: int = HISTOGRAM_BINS) -> list[dict[str, Any]]:
    """Ranks counted by peak allocated in equal-width bins from the lowest peak to the highest.

    Each bin lists the outlier ranks in it, so a lone bar far from the rest can be named."""
    rows = result["ranks"]
    if not rows:
        return []
    peaks = np.array([r["peak_allocated"] for r in rows], np.float64)
    low, high = float(peaks.min()), float(peaks.max())
    if high == low:
        return [{"low": int(low), "high": int(high), "count": len(rows),
                 "outliers": [r["rank"] for r in rows if r["outlier"]]}]
    n = max(1, min(bins, len(rows)))
    edges = np.linspace(low, high, n + 1)
    which = np.minimum(np.searchsorted(edges, peaks, side="right") - 1, n - 1)
    counts = np.bincount(which, minlength=n)
    outliers: list[list[int]] = [[] for _ in range(n)]
    for row, b in zip(rows, which):
        if row["outlier"]:
            outliers[int(b)].append(row["rank"])
    return [{"low": int(edges[b]), "high": int(edges[b + 1]), "count": int(counts[b]), "outliers": outliers[b]}
            for b in range(n)]


def bytes_range(low: int, high: int) -> str:
    return format_bytes(low) if low == high else f"{format_bytes(low)}-{format_bytes(high)}"
