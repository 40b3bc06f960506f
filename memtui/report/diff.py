"""A diff of two moments, devices or files: totals, segments by pool, call sites by change."""

from __future__ import annotations

from memtui.analysis.diff import MemoryDiff
from memtui.report.format import signed_bytes
from memtui.report.sections import Column, Lines, Place, Report, Table
from memtui.units import format_bytes

SITE_COLUMNS = (Column("change", "delta"), Column("bytes_a", "bytes", "A"), Column("bytes_b", "bytes", "B"),
                Column("count_a", "count"), Column("count_b", "count"), Column("status", "text"),
                Column("site", "location", "call site"))


def diff_report(d: MemoryDiff, top: int = 30, show_all: bool = False) -> Report:
    """Sections ``sides``, ``totals``, ``pools`` and the table ``sites``: the changed call
    sites (every site with ``show_all``), largest growth first; the text keeps ``top`` of
    them, from both ends."""
    f = format_bytes
    pools = [f"{p.pool:<22} segments {p.a.segments:>5} -> {p.b.segments:<5} reserved {f(p.a.reserved):>11} ->"
             f" {f(p.b.reserved):<11} allocated {f(p.a.allocated):>11} -> {f(p.b.allocated)}" for p in d.pools]
    changed = [s for s in d.sites if show_all or s.status != "same"]
    sites = Table("sites", space=True, columns=SITE_COLUMNS,
                  rows=[(s.delta_bytes, s.bytes_a, s.bytes_b, s.count_a, s.count_b, s.status, Place(s.site, s.frames))
                        for s in changed],
                  heading=f"{'change':>12} {'A':>11} {'B':>11} {'count':>11}  status   call site",
                  line="{change:>12} {bytes_a:>11} {bytes_b:>11} {count_a:>5}->{count_b:<5}  {status:<7}  {site}",
                  # The largest growth and the largest shrink are both worth seeing: keep both ends.
                  limit=top, tail=top // 2, more=f"{'...':>12}  ({{n}} more; --top or --json for all)",
                  when_empty=["no call site changed"])
    return Report("Diff", [
        Lines("sides", lines=[f"A: {d.a.name}", f"B: {d.b.name}"]),
        Lines("totals", space=True, lines=[
            f"reserved   {f(d.a.reserved):>11} -> {f(d.b.reserved):>11}  ({signed_bytes(d.b.reserved - d.a.reserved)})",
            f"allocated  {f(d.a.allocated):>11} -> {f(d.b.allocated):>11}"
            f"  ({signed_bytes(d.b.allocated - d.a.allocated)})",
            ""]),  # a blank line after the totals even with no pools, as before the sites
        Lines("pools", lines=pools),
        sites,
    ])
