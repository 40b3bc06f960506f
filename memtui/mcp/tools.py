"""What each MCP tool answers: its analysis's service (memtui.services), bounded, and a summary.

Every answer function takes the :class:`~memtui.mcp.store.SnapshotStore`, the tool's
arguments by name (the spec's options and the tool's paging options, see
:mod:`memtui.mcp.answers`) and a progress callback, and returns an
:class:`~memtui.mcp.answers.Answer` whose data is the matching ``--json`` command's
output, bounded. An analysis without an answer function of its own here gets
:func:`generic`. Errors are :class:`memtui.errors.MemtuiError` with a one-line message,
as on the command line. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

from typing import Any

from memtui.cache.summaries import default_summary_cache
from memtui.errors import UsageError
from memtui.fleet.rank_files import default_workers, find_rank_files
from memtui.fleet.runners import local_runner
from memtui.mcp.answers import MAX_LIMIT, PAGING, Answer, Progress, bounded, cut
from memtui.mcp.store import SnapshotStore
from memtui.report.format import signed_bytes
from memtui.report.leaks import describe_points, growth_summary
from memtui.report.oom import explain
from memtui.report.ranks import shortened
from memtui.report.text import text_lines
from memtui.services import events, stack, top
from memtui.services.common import model_notes
from memtui.services.info import summarize
from memtui.services.options import check_value, checked
from memtui.services.spec import AnalysisSpec
from memtui.services.whatif import fits_in
from memtui.units import format_bytes, plural

Args = dict[str, Any]


def options_of(spec: AnalysisSpec, args: Args) -> Any:
    return checked(spec.options, args)


def remembered(store: SnapshotStore, spec: AnalysisSpec, subjects: tuple, options: Any, progress: Progress = None):
    """The spec's service on ``subjects``, run once per model and options (see SnapshotStore.computed)."""
    def run():
        if spec.reports_progress and progress is not None:
            return spec.service(*subjects, options, progress=progress)
        return spec.service(*subjects, options)

    return store.computed(subjects, (spec.name, repr(options)), run)  # repr: options may hold lists


def paging(name: str, args: Args) -> dict[str, int]:
    return {o.name: check_value(o, args.get(o.name, o.default)) for o in PAGING.get(name, ())}


def snapshot_info(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    snapshot = store.open(args["path"], progress)
    data = summarize(snapshot)
    omitted: dict = {}
    for dev in data["devices"]:
        cut(dev["trace"], "ooms", 50, omitted, f"device {dev['device']} trace.ooms")
    cut(data, "warnings", 50, omitted)
    default = snapshot.default_device() if snapshot.present_devices else None
    data["default_device"] = default
    lines = [f"{snapshot.name} ({format_bytes(snapshot.source_size)}): {plural(len(data['devices']), 'device')}"
             + (f", default device {default}" if default is not None else "")]
    for dev in data["devices"]:
        trace = dev["trace"]
        lines.append(f"device {dev['device']}: reserved {format_bytes(dev['reserved'])}, allocated "
                     f"{format_bytes(dev['allocated'])} in {dev['blocks']:,} blocks; trace of {trace['entries']:,}"
                     f" events, {plural(len(trace['ooms']), 'OOM')}, {trace['live_at_end']:,} allocations"
                     " never freed")
    lines += [f"warning: {w}" for w in data["warnings"][:3]]
    return bounded(lines, data, omitted, "the OOM list is cut: explain_oom lists them all")


def top_allocations(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    page = paging("top", args)
    limit, offset = page["limit"], page["offset"]
    device = options_of(spec, args).device
    snapshot = store.open(args["path"], progress)
    result = top.top(snapshot, top.TopOptions(device=device, n=offset + limit))
    rows, total = result.rows[offset:], result.total
    more = offset + len(rows) < total
    data = {"rows": rows, "total": total, "offset": offset, "truncated": more,
            "next_offset": offset + len(rows) if more else None}
    lines = [f"{total:,} live blocks at snapshot time" + (f" on device {device}" if device is not None else "")
             + (f"; rows {offset:,}..{offset + len(rows) - 1:,}, largest first:" if rows else ".")]
    for r in rows[:5]:
        lines.append(f"  {format_bytes(r['size'])}  {r['address_n']}  {r['top_frame'] or '(no stack)'}")
    if more:
        lines.append(f"more: call again with offset={offset + len(rows)}")
    return Answer("\n".join(lines), data)


def event_rows(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    limit = paging("events", args)["limit"]
    options = options_of(spec, {**args, "limit": limit})  # a bad filter fails before the file is read
    result = events.events(store.open(args["path"], progress), options)
    rows = result.to_json()
    data = {"device": result.device, "filter": result.filter, "events_in_trace": result.events_in_trace,
            "matching": result.matching, "start": result.start, "rows": rows, "truncated": result.truncated,
            "next_start": result.next_start}
    n, count, first, before = result.events_in_trace, result.matching, result.start, result.skipped
    what = f"{count:,} of {n:,} events match {result.filter!r}" if result.filtered else f"{n:,} events"
    lines = [f"device {result.device}: {what}; {len(rows):,} rows from trace index {first:,}"
             + (f" (the {before:,} matches before it skipped)" if before else "")]
    for r in rows[:3]:
        lines.append(f"  #{r['index']} {r['action']} {format_bytes(r['size'])} {r['address_n']} {r['top_frame']}")
    if result.truncated:
        lines.append(f"more: call again with start={result.next_start}")
    return Answer("\n".join(lines), data)


def allocation_stack(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    page = paging("stack", args)
    limit, offset = page["limit"], page["offset"]
    options = options_of(spec, args)
    found = stack.stack(store.open(args["path"], progress), options).found
    if isinstance(found, list):
        rows = found[offset:offset + limit]
        more = offset + len(rows) < len(found)
        data = {"allocations": rows, "total": len(found), "offset": offset, "truncated": more,
                "next_offset": offset + len(rows) if more else None}
        lines = [f"{len(found):,} allocations were made at {options.address_n.strip()} (device "
                 f"{found[0]['device']}); call again with one of their address_n values for its stacks:"]
        lines += [f"  {r['address_n']}  {format_bytes(r['size'])}  {r['top_frame']}" for r in rows[:5]]
        if more:
            lines.append(f"more: call again with offset={offset + len(rows)}")
        return Answer("\n".join(lines), data)
    found["truncated"] = False
    lines = [f"{found['address_n']}: {format_bytes(found['size'])} on device {found['device']}"]
    for label, event in found["events"].items():
        frame = event["stack"][0] if event["stack"] else None
        where = f"{frame['filename']}:{frame['line']} {frame['name']}" if frame else event.get("no_stack") or "no stack"
        lines.append(f"  {label} at event {event['index']:,}: {where}")
    if "block" in found:
        lines.append(f"  at snapshot time: {found['block']['state']}")
    elif found["alloc_in_trace"] and "free_completed" not in found["events"]:
        lines.append("  not freed by the end of the trace")
    if not found["alloc_in_trace"]:
        lines.append(f"  {found['alloc_missing']}")
    return Answer("\n".join(lines), found)


def explain_oom(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    limit = paging("oom", args)["limit"]
    options = options_of(spec, args)
    snapshot = store.open(args["path"], progress)
    result = remembered(store, spec, (snapshot,), options)
    found = result.ooms
    data = {"device": result.device, "ooms": [d.to_json() for d in found[:limit]], "total": len(found),
            "truncated": len(found) > limit}
    if result.not_replayed:  # a filtered export: the command's words and field
        data["not_replayed"] = result.to_json()["not_replayed"]
        return Answer(f"{snapshot.name}: " + " ".join(line.strip() for line in text_lines(result.report())), data)
    if not found:
        reason = f" ({result.no_trace_reason}: an OOM before the dump would not show)" if result.no_trace_reason else ""
        return Answer(f"{snapshot.name}: no OOM in this snapshot{reason}", data)
    d = found[0]
    lines = [f"{plural(len(found), 'OOM')}; the first: device {d.device}, event {d.index:,}: requested "
             f"{format_bytes(d.requested)} with {format_bytes(d.device_free)} free on the device; verdict: "
             f"{d.verdict}"]
    lines += explain(d)
    if d.site:
        lines.append(f"requested at: {d.site['site']}")
    if data["truncated"]:
        data["more"] = f"{len(found) - limit} more OOMs: call again with a larger limit (at most {MAX_LIMIT})"
        lines.append(data["more"])
    return Answer("\n".join(lines), data)


def what_if(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    """``memtui whatif --json``: the recording replayed under other allocator settings."""
    options = options_of(spec, args)
    result = remembered(store, spec, (store.open(args["path"], progress),), options, progress).whatif
    fid = result.fidelity
    lines = [result.advice]
    if not fid.checked:
        lines.append("fidelity: not checked (no segment events in the trace): the figures are the model's alone")
    elif fid.exact:
        lines.append(f"fidelity: exact ({fid.segment_events:,} segment events reproduced)")
    else:
        lines.append(f"fidelity: NOT exact ({fid.matched:,} of {fid.segment_events:,}); first difference:"
                     f" {fid.first_difference}; the predictions are not certain")
    for s in result.scenarios:
        runs_out = f"runs out at event {s.oom_event:,}" if s.oom_event is not None else "does not run out"
        fits = f", fits in {fits_in(s)}" if s.min_cap_bytes is not None else ""
        lines.append(f"{s.settings or 'default'}: reserved peak {format_bytes(s.reserved_peak)}, {runs_out}{fits}")
    return bounded(lines, result.to_json(), {}, "")


def leak_sites(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    options = options_of(spec, args)
    report = remembered(store, spec, (store.open(args["path"], progress),), options).leaks
    data = report.to_json()
    omitted: dict = {}
    cut(data, "sites", MAX_LIMIT, omitted)
    lines = [f"device {report.device}: {format_bytes(report.live_bytes)} in {report.live_count:,} live allocations"
             f" at snapshot time; {describe_points(report)}"]
    lines.append(growth_summary(report))
    growing = report.growing
    for s in growing[:5]:
        lines.append(f"  +{format_bytes(s.growth_bytes)} ({s.growth_count:+,} allocations) at {s.label}")
    if not growing:
        for s in report.sites[:3]:
            lines.append(f"  holds {format_bytes(s.bytes)} in {s.count:,} allocations ({s.kind}): {s.label}")
    return bounded(lines, data, omitted, f"only the first {MAX_LIMIT} call sites are listed")


def reference_cycles(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    limit = paging("cycles", args)["limit"]
    options = options_of(spec, args)
    report = remembered(store, spec, (store.open(args["path"], progress),), options).cycles
    data = report.to_json()
    omitted: dict = {}
    for key in ("sites", "bursts", "ooms_while_accumulating"):
        cut(data, key, limit, omitted)
    if report.suspected is None:
        lines = [f"device {report.device}: cannot tell whether reference cycles held memory: "
                 + (report.evidence[0].text if report.evidence else "nothing recorded tells")]
    elif not report.suspected:
        lines = [f"device {report.device}: no reference-cycle sawtooth (no burst of frees of memory made over"
                 " many iterations)"]
    else:
        held = max(b.bytes for b in report.bursts)
        lines = [f"device {report.device}: reference cycles suspected ({report.pattern}):"
                 f" {plural(len(report.bursts), 'garbage-collector burst')} freed up to {format_bytes(held)} that"
                 " had piled up over many iterations"]
        lines += [f"  {format_bytes(s.bytes)} in {plural(s.lives, 'allocation')} from {s.site}"
                  for s in report.sites[:3]]
        lines += [f"  an OOM at event {o['index']:,} struck while {format_bytes(o['bytes'])} waited for the"
                  " collector" for o in report.ooms_while_accumulating[:2]]
    return bounded(lines, data, omitted, f"call again with a larger limit (at most {MAX_LIMIT})")


def memory_breakdown(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    options = options_of(spec, args)
    result = remembered(store, spec, (store.open(args["path"], progress),), options)
    data = result.to_json()
    omitted: dict = {}
    cut(data, "sites", MAX_LIMIT, omitted)
    if "steps" in data:
        cut(data["steps"], "steps", MAX_LIMIT, omitted, "steps.steps")
    moment, found = result.moment, result.result
    where = f"after event {result.dev.shown_index(moment.event):,}" if moment.event >= 0 else "at snapshot time"
    total = max(found.allocated, 1)
    lines = [f"device {result.dev.device}, {moment.name} ({where}): allocated {format_bytes(found.allocated)} of"
             f" {format_bytes(found.reserved)} reserved, {format_bytes(found.cached_free)} cached free"]
    shares = sorted(((v, k) for k, v in found.categories.items() if v), reverse=True)
    lines.append(", ".join(f"{k} {format_bytes(v)} ({100 * v / total:.0f}%)" for v, k in shares) or "nothing allocated")
    biggest = found.top_sites.get(shares[0][1], []) if shares else []
    if biggest:
        lines.append(f"largest {shares[0][1]} call site: {biggest[0].label} ({format_bytes(biggest[0].bytes)})")
    return bounded(lines, data, omitted, f"only the first {MAX_LIMIT} are listed")


def diff_snapshots(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    options = options_of(spec, args)
    first = store.open(args["a"], progress)
    second = store.open(args["b"], progress)
    result = remembered(store, spec, (first, second), options).diff
    top_n = options.top
    data = result.to_json()
    sites = [s for s in data["sites"] if options.include_unchanged or s["status"] != "same"]
    omitted: dict = {}
    if len(sites) > top_n:
        # The largest growth and the largest shrink are both worth seeing: keep both ends.
        omitted["sites"] = len(sites) - top_n
        sites = sites[: top_n - top_n // 2] + sites[len(sites) - top_n // 2:]
    data["sites"] = sites
    for key in ("new", "gone"):
        cut(data, key, top_n, omitted)
    f = format_bytes
    view_a, view_b = result.a, result.b
    lines = [f"A: {view_a.name}  ->  B: {view_b.name}",
             f"reserved {f(view_a.reserved)} -> {f(view_b.reserved)} ({signed_bytes(data['delta_reserved'])}), "
             f"allocated {f(view_a.allocated)} -> {f(view_b.allocated)} ({signed_bytes(data['delta_allocated'])})"]
    changed = [s for s in result.sites if s.status != "same"]
    lines.append(f"{plural(len(changed), 'call site')} changed ({len(result.new)} new, {len(result.gone)} gone)")
    for s in changed[:3]:
        lines.append(f"  {signed_bytes(s.delta_bytes)} ({s.status}) {s.site}")
    return bounded(lines, data, omitted, f"call again with a larger top (at most {MAX_LIMIT})")


def rank_files(store: SnapshotStore, inputs: list[str]) -> list[str]:
    """The rank files named, each under the server's roots."""
    if not inputs:
        raise UsageError("inputs: give rank snapshot files or a directory of them")
    named = [store.resolve(item, directory_too=True) for item in inputs]
    # A directory's files are checked too: a link in it may point outside the roots.
    return [store.resolve(file) for file in find_rank_files(named)]


def run_ranks(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress) -> Any:
    options = options_of(spec, args)
    files = rank_files(store, args["inputs"])
    runner = local_runner(max(1, min(default_workers(), len(files))))
    report = None if progress is None else (lambda done, total, failed: progress("ranks", done, total))
    try:
        return spec.service(files, options, runner, default_summary_cache(store.cache), report)
    finally:
        runner.close()


def compare_ranks(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    limit = paging("ranks", args)["limit"]
    result = run_ranks(store, spec, args, progress)
    data, summaries, at = result.data, result.summaries, result.at
    if not data["ranks"]:
        raise UsageError("no rank file could be read: " + "; ".join(f["error"] for f in data["failed"][:3]))
    ranks = len(data["ranks"])
    data, rows_left_out, outliers_left_out = shortened(data, limit)
    data = dict(data)
    omitted: dict = {}
    if rows_left_out:
        omitted["ranks"] = rows_left_out
    if outliers_left_out:
        omitted["outliers"] = outliers_left_out
    for key in ("divergent_sites", "outlier_groups", "failed"):
        cut(data, key, limit, omitted)
    lines = [f"{ranks} ranks compared" + (f" ({len(summaries) - ranks} files failed)" if len(summaries) > ranks
                                           else "") + f" at each rank's {at}; reference rank "
             f"{data['reference_rank']} (median peak allocated {format_bytes(data['median_peak_allocated'])})"]
    if not data["outliers"]:
        lines.append("no outlier rank")
    for o in data["outliers"][:5]:
        lines.append(f"outlier: rank {o['rank']}: " + "; ".join(o["reasons"]))
    for d in data["divergent_sites"][:3]:
        lines.append(f"  rank {d['rank']} {signed_bytes(d['delta'])} at {d['site']}")
    return bounded(lines, data, omitted, "with many ranks only the outliers and the median rank are listed; a"
                                         f" larger limit (at most {MAX_LIMIT}) lists more")


def live_status(store: SnapshotStore, target: str | None = None, limit: int = 64, progress: Progress = None) -> Answer:
    """The memory of running jobs now, as ``memtui watch --status --json`` prints it (read from
    their live sockets without asking for their trace, so it costs a job nothing)."""
    from memtui.live.client import read_status
    from memtui.live.runtime import list_jobs, runtime_dir, select_jobs

    folder = runtime_dir(create=False)
    jobs = list_jobs(folder)
    chosen = select_jobs(jobs, target) if target else jobs
    if target and not chosen:
        raise UsageError(f"no live job matches {target!r} ({plural(len(jobs), 'live job')} in {folder})")
    statuses = []
    for job in chosen[:limit]:
        try:
            statuses.append(read_status(job))
        except UsageError as exc:  # it ended between the listing and now
            statuses.append({"pid": job.pid, "rank": job.rank, "job": job.job, "error": exc.message, "devices": []})
    data = {"folder": folder, "jobs": statuses}
    omitted = {"jobs": len(chosen) - limit} if len(chosen) > limit else {}
    lines = [f"{plural(len(chosen), 'live job')} in {folder}" if chosen else
             f"no live jobs in {folder}: a job serves itself with memtui run --live, memtui.record.live() or "
             "MEMTUI_LIVE=1"]
    for s in statuses:
        who = f"pid {s['pid']}" + (f" rank {s['rank']}" if s.get("rank") is not None else "")
        if s.get("error"):
            lines.append(f"{who}: {s['error']}")
        for d in s["devices"]:
            headroom = format_bytes(d["headroom"]) if d.get("headroom") is not None else "unknown"
            lines.append(f"{who} device {d['device']}: allocated {format_bytes(d['allocated'])}, reserved "
                         f"{format_bytes(d['reserved'])}, headroom {headroom}"
                         + (f", {plural(d['ooms'], 'OOM')}" if d.get("ooms") else ""))
    return bounded(lines, data, omitted,
                   f"a target (a pid, PID:RANK or job id) or a larger limit (at most {MAX_LIMIT})")


GENERIC_SUMMARY_LINES = 12


def generic(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    """An analysis without an answer of its own: its JSON with every list cut to the budget,
    and the first lines of its report as the summary."""
    if spec.subject == "rank_files":
        result = run_ranks(store, spec, args, progress)
    else:
        options = options_of(spec, args)
        if spec.subject == "pair":
            subjects = (store.open(args["a"], progress), store.open(args["b"], progress))
        else:
            subjects = (store.open(args["path"], progress),)
        result = remembered(store, spec, subjects, options, progress)
    value = result.to_json()
    data = value if isinstance(value, dict) else {"rows": value}
    omitted: dict = {}
    for key in list(data):
        cut(data, key, MAX_LIMIT, omitted)
    lines = text_lines(result.report())
    summary = lines[:GENERIC_SUMMARY_LINES] + ([f"({len(lines) - GENERIC_SUMMARY_LINES} more lines of the report)"]
                                               if len(lines) > GENERIC_SUMMARY_LINES else [])
    return bounded(summary, data, omitted, f"only the first {MAX_LIMIT} of each list are listed")


# The answer of each analysis that has one of its own; the others get :func:`generic`.
ANSWERS = {"info": snapshot_info, "top": top_allocations, "events": event_rows, "stack": allocation_stack,
           "oom": explain_oom, "leaks": leak_sites, "cycles": reference_cycles, "breakdown": memory_breakdown,
           "diff": diff_snapshots, "ranks": compare_ranks, "whatif": what_if}


def answer(store: SnapshotStore, spec: AnalysisSpec, args: Args, progress: Progress = None) -> Answer:
    found = ANSWERS.get(spec.name, generic)(store, spec, args, progress)
    # What the command line says on stderr before its answer (the open's notice, values the
    # model replaced), the agent reads first, and finds under "notes".
    keys = {"snapshot": ("path",), "pair": ("a", "b")}.get(spec.subject, ())
    notes = [note for key in keys for note in model_notes(store.open(args[key]), args[key],
                                                          replaced=spec.name != "info")]  # info lists them
    if not notes:
        return found
    return Answer("\n".join([f"note: {note}" for note in notes] + [found.summary]), {**found.data, "notes": notes})
