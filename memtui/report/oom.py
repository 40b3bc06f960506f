"""Why each OOM happened: the figures at the failure, the verdict and its evidence, what to
do, and the call sites and allocations holding the memory."""

from __future__ import annotations

from typing import Any

from memtui.analysis.oom import OomDiagnosis
from memtui.report.sections import AnySection, Column, Evidence, Lines, Notes, Place, Report, Table
from memtui.units import format_bytes

SITE_COLUMNS = (Column("bytes", "bytes"), Column("count", "count"), Column("site", "location", "call site"))


def oom_report(device: int, found: list[OomDiagnosis], largest_shown: int | None = None,
               no_trace_reason: str | None = None, elsewhere: tuple[int, int] | None = None) -> Report:
    """Every OOM of ``device``, one after another; each has a ``sites`` table (the call
    sites holding memory at it) and, for capacity and cap verdicts, a ``largest`` table
    (its text: at most ``largest_shown`` allocations). ``no_trace_reason``: why a file
    without a trace could not show an OOM (an OOM-time dump without history is one);
    ``elsewhere``: (device, event) of another device's OOM, where this one has none."""
    if not found:
        lines = [f"device {device}: no OOM in this snapshot's trace"]
        if elsewhere is not None:
            lines[0] += f"; device {elsewhere[0]} has one, at event {elsewhere[1]:,} (--device {elsewhere[0]})"
        if no_trace_reason:
            lines.append(f"  {no_trace_reason}: an OOM before the dump would not show")
        return Report("Why OOM", [Lines(lines=lines)])
    sections: list[AnySection] = []
    for n, d in enumerate(found, 1):
        part = diagnosis_sections(d, n, len(found), largest_shown)
        part[0].space = n > 1
        sections += part
    return Report("Why OOM", sections)


def diagnosis_sections(d: OomDiagnosis, n: int = 1, total: int = 1,
                       largest_shown: int | None = None) -> list[AnySection]:
    f = format_bytes
    sections: list[AnySection] = [Lines("figures", lines=[
        f"OOM {n} of {total}: device {d.device}, event {d.index:,}",
        f"  requested      {f(d.requested):>11}   ({d.pool} pool, stream {d.stream})",
        f"  device free    {f(d.device_free):>11}",
        f"  reserved       {f(d.reserved):>11}   allocated {f(d.allocated)}   active {f(d.active)}",
        f"  cached free    {f(d.cached_free):>11}   usable for this request {f(d.usable_free)},"
        f" largest free block in the {d.pool} pool (stream {d.stream}) {f(d.largest_free_block)}",
        f"  verdict: {d.verdict} ({d.confidence} confidence; the limit: {d.limit})",
    ])]
    sections.append(Evidence("evidence", indent="  ", because=[e.text for e in d.evidence],
                             alternatives=[(a["verdict"], a["why"]) for a in d.alternatives], always=True))
    sections.append(Notes("advice", indent="  ", lines=explain(d)))
    if d.site:
        sections.append(Lines("requested_at", lines=[f"  requested at: {d.site['site']}"]))
    sections.append(site_table(d.top_sites, "  call sites holding memory at the OOM:", "    "))
    if d.verdict in ("capacity", "process_cap"):
        sections.append(Table(
            "largest", columns=(Column("size", "bytes"), Column("address", "text"), SITE_COLUMNS[2]),
            rows=[(a["size"], a["address_n"] or "(untraced)", Place(a["site"])) for a in d.largest_allocations],
            title="  largest live allocations:", line="    {size:>11}  {address:<20} {site}", limit=largest_shown))
    return sections


def site_table(rows: list[dict[str, Any]], title: str = "", indent: str = "  ", key: str = "sites") -> Table:
    """Call sites as ``{"site", "bytes", "count", "frames"}`` dicts: ``  1.00 GiB      3  file:line function``."""
    return Table(key, columns=SITE_COLUMNS, title=title, line=indent + "{bytes:>11} {count:>6}  {site}",
                 rows=[(r["bytes"], r["count"], Place(r["site"], r.get("frames"))) for r in rows])


def explain(d: OomDiagnosis) -> list[str]:
    """What to do about it, and how the device's size was known."""
    f = format_bytes
    out = []
    if d.replayed:
        served = d.served_by
        unsure = "" if d.replay_exact else " (not certain: see the evidence)"
        if served:
            out.append(f"Replayed through the allocator model, PYTORCH_CUDA_ALLOC_CONF={served[0]} serves this request"
                       f"{unsure}; memtui whatif SNAPSHOT tells what comes after it and the smallest memory that fits.")
        elif any(served is None for _, served in d.replayed):
            maybe = ", ".join(text for text, served in d.replayed if served is None)
            out.append(f"Replayed through the allocator model, {maybe} serves this request only if the cap was high"
                       f" enough (the recording bounds it, see the evidence){unsure}; memtui whatif --cap BYTES"
                       " answers for a given cap.")
        else:
            tried = ", ".join(text for text, _ in d.replayed)
            out.append(f"Replayed through the allocator model, no setting tried ({tried}) serves this request{unsure}:"
                       " the memory itself is short.")
    if d.verdict == "fragmentation":
        if d.expandable_already:
            out.append("Expandable segments are already on: free the long-lived blocks that split the segments, or"
                       " try a smaller max_split_size_mb.")
        elif not d.replayed:
            out.append("Free the long-lived blocks that split the segments (memtui whatif replays other allocator"
                       " settings).")
        else:
            out.append("Or free the long-lived blocks that split the segments.")
    elif d.verdict == "external":
        out.append("Free the device of the other user (another process, NCCL buffers, cuBLAS workspaces), or give"
                   " the real total with --device-memory if the estimate is wrong.")
    elif d.verdict == "cannot tell":
        out.append("Packing the holes (expandable_segments:True, or freeing the long-lived blocks that split the"
                   " segments) helps only if the cap leaves the rest; raising the cap or reducing what is live helps"
                   " either way.")
    elif d.verdict == "process_cap":
        out.append("Raise the cap (torch.cuda.set_per_process_memory_fraction) or bound the growing work (the"
                   " batch); see the call sites below for what the step holds.")
    elif d.process_limit:
        out.append("Reduce what is live at this point (see below), or raise the cap.")
    else:
        short = d.requested - d.usable_free - d.device_free
        out.append(f"Short by {f(max(short, 0))} even as one block: reduce what is live at this point (see below).")
    if d.device_total is not None and not d.process_limit and d.verdict != "external":
        # The snapshot does not record the device's size; say how the figure was made and
        # where to give the real one (the explorer has no such option: the CLI does).
        if d.device_total_estimated:
            out.append(f"Device total: not recorded in the snapshot; at least {f(d.device_total)} (estimated: the"
                       f" smallest common GPU size above reserved + device free), so at least"
                       f" {f(d.non_pytorch or 0)} in use outside PyTorch.")
        else:
            out.append(f"Device total {f(d.device_total)}: {f(d.non_pytorch or 0)} in use outside PyTorch.")
        if d.device_total_estimated:
            out.append("For the real total: memtui oom SNAPSHOT --device-memory SIZE (e.g. 80GiB).")
    return out
