"""Did reference cycles hold memory: the verdict, its evidence, the call sites the collector
freed and the bursts of frees."""

from __future__ import annotations

from memtui.analysis.bursts import CYCLE as CYCLE_CAUSE
from memtui.analysis.cycles import CANNOT_TELL, CYCLES, Burst, CycleReport
from memtui.report.sections import Column, Evidence, Lines, Notes, Place, Report, Table
from memtui.units import format_bytes, plural


def cycles_report(report: CycleReport, bursts_shown: int | None = None) -> Report:
    """Sections ``headline``, ``evidence``, ``sites``, ``bursts`` (what the collector freed),
    ``other_bursts`` and ``advice``; the text lists at most ``bursts_shown`` bursts of each kind."""
    rounds = ", up to {rounds} steps each" if report.rounds_by == "steps" else ""
    sites = Table(
        "sites", space=True, title="call sites whose allocations the collector freed:",
        columns=(Column("bytes", "bytes", "freed"), Column("lives", "count", "lives", unit="allocation"),
                 Column("bursts", "count", unit="burst"), Column("rounds", "count"),
                 Column("site", "location", "call site")),
        rows=[(s.bytes, s.lives, s.bursts, s.rounds, Place(s.site, s.frames)) for s in report.sites],
        line="  {bytes:>11} in {lives} over {bursts}" + rounds + "  {site}")
    advice = ["suggestion: call torch.utils.viz._cycles.warn_tensor_cycles() early in the program to be told"
              " which objects form the cycles, then break them (weakref, del, clearing the attribute)."]
    return Report("Reference cycles", [
        Lines("headline", lines=[headline(report)]),
        Evidence("evidence", because=[e.text for e in report.evidence],
                 alternatives=[(a["verdict"], a["why"]) for a in report.alternatives]),
        sites,
        burst_table("bursts", report, report.bursts, "order, collected at", limit=bursts_shown),
        burst_table("other_bursts", report, report.other_bursts, "cause (confidence), freed at",
                    "bursts of frees with another cause (or none known):", bursts_shown),
        Notes("advice", space=True, lines=advice if report.suspected else []),
    ])


def headline(report: CycleReport) -> str:
    """The verdict in one line: the device, the confidence and what the stacks recorded."""
    f = format_bytes
    how = f"{report.confidence} confidence; stacks recorded: {report.stacks}"
    if report.verdict == CYCLES:
        bursts = report.bursts
        held = max(b.bytes for b in bursts)
        if report.bounded:
            return (f"device {report.device}: reference cycles ({how}), bounded sawtooth:"
                    f" {plural(len(bursts), 'garbage collection')} each freed up to {f(held)} that had piled up")
        return (f"device {report.device}: reference cycles ({how}), unbounded: {f(held)} piled up and came back only"
                " when the garbage collector ran" + (" (once)" if len(bursts) == 1 else " (and each burst freed more)"))
    if report.verdict == CANNOT_TELL:
        return f"device {report.device}: cannot tell whether reference cycles held memory ({how})"
    return f"device {report.device}: no reference cycles ({how})"


def burst_how(cause: str, confidence: str, order: str) -> str:
    """How a burst freed, as every view words it: the collector's free order for a reference
    cycle, else the burst's cause and the confidence in it ("refcount (medium)")."""
    return order if cause == CYCLE_CAUSE else f"{cause} ({confidence})"


def burst_table(key: str, report: CycleReport, bursts: list[Burst], last_column: str, title: str = "",
                limit: int | None = None) -> Table:
    """A row per burst, from its first free; ``last``: how it was freed and where."""
    columns = (Column("event", "event"), Column("time", "seconds"), Column("bytes", "bytes", "freed"),
               Column("lives", "count"), Column("before", "bytes", "peak before"), Column("after", "bytes"),
               Column("order", "text"), Column("collected_at", "text", "collected at"), Column("cause", "text"),
               Column("confidence", "text"), Column("last", "text", last_column))
    rows = [(b.index, report.seconds_into_trace(b), b.bytes, b.lives, b.allocated_before, b.allocated_after, b.order,
             b.collected_at, b.cause, b.confidence, f"{burst_how(b.cause, b.confidence, b.order)}, {b.collected_at}")
            for b in bursts]
    heading = (f"{'event':>9} {'time':>10} {'freed':>11} {'lives':>6} {'peak before':>12} {'after':>11}"
               f"  {last_column}")
    return Table(key, space=True, columns=columns, rows=rows, title=title, heading=heading,
                 line="{event:>9,} {time:>10} {bytes:>11} {lives:>6,} {before:>12} {after:>11}  {last}",
                 limit=limit, more="... and {n} more bursts (--json lists all)")
