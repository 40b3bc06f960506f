"""Leaks: the verdict and its evidence, the call sites whose kept memory grew all through the
run, and the rest of live memory by call site."""

from __future__ import annotations

from typing import Any

from memtui.analysis.leaks import RISING, LeakReport, SiteGrowth
from memtui.analysis.steps import TIME_WINDOW_POINT
from memtui.report.format import sparkline
from memtui.report.sections import Column, Evidence, Lines, Place, Report, Table
from memtui.units import format_bytes, plural

SITE_COLUMNS = (Column("growing", "text", ""), Column("bytes", "bytes", "live bytes"), Column("count", "count"),
                Column("growth", "delta"), Column("per_unit", "delta"), Column("growth_count", "count"),
                Column("trend", "text", "over the run"), Column("kind", "text", "growth"),
                Column("site", "location", "call site"))


def leaks_report(report: LeakReport) -> Report:
    """Sections ``headline``, ``evidence``, ``live``, and the tables ``growing`` and ``sites``
    (the others): together every site of the report, in its order, with the same columns."""
    unit = report.points.unit.replace("{", "{{").replace("}", "}}")
    growing = Table("growing", space=True, columns=SITE_COLUMNS, rows=site_rows(report.growing),
                    title="growing call sites (what they keep rose all through the run):",
                    line="  {growth:>12} ({per_unit}/" + unit + ", {growth_count:+,} allocations)  {trend}  holds"
                         " {bytes} in {count:,}  {site}")
    rest = [s for s in report.sites if not s.growing]
    others = Table("sites", space=True, columns=SITE_COLUMNS, rows=site_rows(rest),
                   heading=f"{'live bytes':>12} {'count':>7}  over the run  {'growth':<9} call site",
                   line="{bytes:>12} {count:>7,}  {trend:<12}  {kind:<9} {site}")
    return Report("Leaks and growth by call site", [
        Lines("headline", lines=[headline(report)]),
        Evidence("evidence", because=[e.text for e in report.evidence],
                 alternatives=[(a["verdict"], a["why"]) for a in report.alternatives]),
        Lines("live", lines=[f"{format_bytes(report.live_bytes)} in {report.live_count:,} live allocations at"
                             f" snapshot time; {describe_points(report)}"]),
        growing,
        others,
    ])


def site_rows(sites: list[SiteGrowth]) -> list[tuple[Any, ...]]:
    return [("▲" if s.growing else "", s.bytes, s.count, s.growth_bytes, s.growth_per_unit, s.growth_count,
             sparkline(s.series_bytes), s.kind, Place(s.label, s.frames)) for s in sites]


def growth_summary(report: LeakReport) -> str:
    """One line on which call sites kept more over the run, worded by the same kinds the
    verdict's evidence uses: the sites whose kept memory rose all through the run (marked ▲),
    and the sites that still kept more when the trace ended with memory made lately
    (``rising``: a buffer grown by copying keeps more each round without holding on to
    what each round made). Every view that sums up the leaks report says it this way."""
    growing = [s.label for s in report.growing]
    rising = [s.label for s in report.sites if not s.growing and s.kind == RISING]
    parts = []
    if growing:
        parts.append(f"{plural(len(growing), 'call site')} kept more all through the run (marked ▲):"
                     f" {', '.join(growing)}")
    if rising:
        parts.append(f"{plural(len(rising), 'call site')} still kept more when the trace ended, with memory made"
                     f" lately (growth: rising): {', '.join(rising)}")
    return "; ".join(parts) if parts else "no call site kept more all through the run or was still growing at its end"


def headline(report: LeakReport) -> str:
    words = {"leak": "a leak", "no leak": "no leak", "cannot tell": "cannot tell whether memory leaks"}
    return f"device {report.device}: {words.get(report.verdict, report.verdict)} ({report.confidence} confidence)"


def describe_points(report: LeakReport) -> str:
    """The points the growth table shows over the run: "points", as the verdict's evidence says
    "samples" of the (often many more) moments it classifies."""
    p = report.points
    if p.kind == "annotation":
        return f"{plural(len(p), 'point')} over {plural(p.steps, 'step')} (end of each '{p.name}')"
    if p.kind == "iterations":
        return (f"{plural(len(p), 'point')} over {plural(p.steps, 'execution')} of the most repeated allocation"
                f" ({p.name})")
    if p.kind == "time":
        return f"{plural(len(p), 'point')}, {TIME_WINDOW_POINT} (no step annotations)"
    return f"{plural(len(p), 'point')}, one per event window (no times or step annotations)"
