"""What each MCP tool answers: the JSON of the matching ``--json`` command, bounded, and a summary.

Every function takes the :class:`~memtui.mcp.store.SnapshotStore` first and a progress
callback last, and returns an :class:`Answer`. The JSON is built by the same functions
the commands use (``memtui info --json`` is :func:`memtui.commands.info.summarize`, and
so on); long lists are cut to the caller's ``limit`` with ``"truncated": true``, what was
left out under ``"omitted"`` and how to see more under ``"more"``. Errors are
:class:`memtui.errors.MemtuiError` with a one-line message, as on the command line.
Nothing here imports the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memtui.analysis.cycles import find_cycles
from memtui.analysis.diff import diff_views
from memtui.analysis.leaks import find_leaks
from memtui.analysis.oom import diagnose_ooms
from memtui.analysis.whatif import what_if as replay_settings
from memtui.cache.summaries import default_summary_cache
from memtui.commands._ranks_overview import shortened
from memtui.commands._report import signed_bytes
from memtui.commands.diff import side
from memtui.commands.events import event_row
from memtui.commands.info import summarize
from memtui.commands.leaks import describe_points
from memtui.commands.oom import explain
from memtui.commands.ranks import ranks_json
from memtui.commands.stack import allocation_json
from memtui.commands.top import largest_live_blocks
from memtui.errors import UsageError
from memtui.fleet.rank_files import default_workers, find_rank_files, summarize_files
from memtui.fleet.runners import local_runner
from memtui.mcp.store import SnapshotStore
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.query import compile_filter
from memtui.units import format_bytes, parse_size, plural

MAX_LIMIT = 1000  # the most rows any one answer holds; page for more
Progress = Callable[[str, int, int], None] | None


@dataclass
class Answer:
    summary: str  # a few lines for a reader
    data: dict  # the --json structure, bounded


def snapshot_info(store: SnapshotStore, path: str, progress: Progress = None) -> Answer:
    snapshot = store.open(path, progress)
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


def top_allocations(store: SnapshotStore, path: str, limit: int = 20, offset: int = 0, device: int | None = None,
                    progress: Progress = None) -> Answer:
    limit, offset = valid_limit(limit), valid_offset(offset)
    snapshot = store.open(path, progress)
    if device is not None:
        snapshot.device_or_default(device)
    total = sum(int(np.count_nonzero((d.blocks.state == ALLOCATED) | (d.blocks.state == PENDING_FREE)))
                for d in snapshot.devices if device is None or d.device == device)
    rows = largest_live_blocks(snapshot, offset + limit, device)[offset:]
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


def events(store: SnapshotStore, path: str, filter: str = "", start: int = 0, limit: int = 50,
           device: int | None = None, progress: Progress = None) -> Answer:
    limit = valid_limit(limit)
    compiled = compile_filter(filter)  # a bad filter fails before the file is read
    snapshot = store.open(path, progress)
    device = snapshot.device_or_default(device)
    dev = snapshot.devices[device]
    n = len(dev.trace)
    first = max(0, start + n) if start < 0 else start
    if not 0 <= first <= n:
        raise UsageError(f"start {start} is outside the trace (0..{n - 1})")
    matching = compiled.indices(snapshot, device) if not compiled.matches_everything else None
    count = n if matching is None else len(matching)
    if matching is None:
        chosen = np.arange(first, min(n, first + limit + 1))
        before = first
    else:
        before = int(np.searchsorted(matching, first))
        chosen = matching[before:before + limit + 1]
    more = len(chosen) > limit
    chosen = chosen[:limit]
    t0 = dev.time_origin_us
    rows = [event_row(snapshot, device, int(i), t0) for i in chosen]
    next_start = int(chosen[-1]) + 1 if more else None
    data = {"device": device, "filter": filter, "events_in_trace": n, "matching": count, "start": first,
            "rows": rows, "truncated": more, "next_start": next_start}
    what = f"{count:,} of {n:,} events match {filter!r}" if matching is not None else f"{n:,} events"
    lines = [f"device {device}: {what}; {len(rows):,} rows from trace index {first:,}"
             + (f" (the {before:,} matches before it skipped)" if before and matching is not None else "")]
    for r in rows[:3]:
        lines.append(f"  #{r['index']} {r['action']} {format_bytes(r['size'])} {r['address_n']} {r['top_frame']}")
    if more:
        lines.append(f"more: call again with start={next_start}")
    return Answer("\n".join(lines), data)


def allocation_stack(store: SnapshotStore, path: str, address_n: str, all_frames: bool = False, limit: int = 50,
                     offset: int = 0, progress: Progress = None) -> Answer:
    limit, offset = valid_limit(limit), valid_offset(offset)
    snapshot = store.open(path, progress)
    found = allocation_json(snapshot, address_n, all_frames)
    if isinstance(found, list):
        rows = found[offset:offset + limit]
        more = offset + len(rows) < len(found)
        data = {"allocations": rows, "total": len(found), "offset": offset, "truncated": more,
                "next_offset": offset + len(rows) if more else None}
        lines = [f"{len(found):,} allocations were made at {address_n.strip()} (device {found[0]['device']});"
                 " call again with one of their address_n values for its stacks:"]
        lines += [f"  {r['address_n']}  {format_bytes(r['size'])}  {r['top_frame']}" for r in rows[:5]]
        if more:
            lines.append(f"more: call again with offset={offset + len(rows)}")
        return Answer("\n".join(lines), data)
    found["truncated"] = False
    lines = [f"{found['address_n']}: {format_bytes(found['size'])} on device {found['device']}"]
    for label, event in found["events"].items():
        top = event["stack"][0] if event["stack"] else None
        where = f"{top['filename']}:{top['line']} {top['name']}" if top else event.get("no_stack") or "no stack"
        lines.append(f"  {label} at event {event['index']:,}: {where}")
    if "block" in found:
        lines.append(f"  at snapshot time: {found['block']['state']}")
    elif found["alloc_in_trace"] and "free_completed" not in found["events"]:
        lines.append("  not freed by the end of the trace")
    if not found["alloc_in_trace"]:
        lines.append("  allocated before the trace starts")
    return Answer("\n".join(lines), found)


def explain_oom(store: SnapshotStore, path: str, device: int | None = None, device_memory: int | str | None = None,
                depth: int = 1, top: int = 10, limit: int = 5, progress: Progress = None) -> Answer:
    limit, depth, total_memory = valid_limit(limit), valid_depth(depth), valid_size(device_memory)
    snapshot = store.open(path, progress)
    device = snapshot.device_or_default(device)  # the device `memtui oom` looks at
    found = diagnose_ooms(snapshot, device, total_memory, depth, min(max(top, 0), MAX_LIMIT))
    data = {"device": device, "ooms": [d.to_json() for d in found[:limit]], "total": len(found),
            "truncated": len(found) > limit}
    if not found:
        return Answer(f"{snapshot.name}: no OOM in this snapshot", data)
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


def what_if(store: SnapshotStore, path: str, conf: list[str] | None = None, cap: int | str | None = None,
            device: int | None = None, progress: Progress = None) -> Answer:
    """``memtui whatif --json``: the recording replayed under other allocator settings."""
    if conf is not None and (not isinstance(conf, list) or not all(isinstance(c, str) for c in conf)):
        raise UsageError("conf: a list of PYTORCH_CUDA_ALLOC_CONF values")
    if conf is not None and len(conf) > 20:
        raise UsageError("conf: at most 20 settings at once")
    limit = valid_size(cap)
    snapshot = store.open(path, progress)
    device = snapshot.device_or_default(device)
    result = replay_settings(snapshot, device, conf or None, limit, progress)
    data = result.to_json()
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
        fits = f", fits in {format_bytes(s.min_cap_bytes)}" if s.min_cap_bytes is not None else ""
        lines.append(f"{s.settings or 'default'}: reserved peak {format_bytes(s.reserved_peak)}, {runs_out}{fits}")
    return bounded(lines, data, {}, "")


def leaks(store: SnapshotStore, path: str, device: int | None = None, depth: int = 1, top: int = 20,
          windows: int = 10, points: int = 24, progress: Progress = None) -> Answer:
    top, depth = min(max(top, 0), MAX_LIMIT), valid_depth(depth)
    snapshot = store.open(path, progress)
    dev = snapshot.devices[snapshot.device_or_default(device)]
    report = find_leaks(snapshot, dev, depth, min(max(points, 2), 500), min(max(windows, 2), 500), top)
    data = report.to_json()
    omitted: dict = {}
    cut(data, "sites", MAX_LIMIT, omitted)
    lines = [f"device {report.device}: {format_bytes(report.live_bytes)} in {report.live_count:,} live allocations"
             f" at snapshot time; {describe_points(report)}"]
    growing = report.growing
    if growing:
        lines.append(f"{plural(len(growing), 'call site')} grew steadily (live memory never fell and rose in most"
                     " steps):")
        for s in growing[:5]:
            lines.append(f"  +{format_bytes(s.growth_bytes)} ({s.growth_count:+,} allocations) at {s.label}")
    else:
        lines.append("no call site grew steadily over the run")
        for s in report.sites[:3]:
            lines.append(f"  holds {format_bytes(s.bytes)} in {s.count:,} allocations: {s.label}")
    return bounded(lines, data, omitted, f"only the first {MAX_LIMIT} call sites are listed")


def reference_cycles(store: SnapshotStore, path: str, device: int | None = None, depth: int = 1, limit: int = 20,
                     progress: Progress = None) -> Answer:
    limit, depth = valid_limit(limit), valid_depth(depth)
    snapshot = store.open(path, progress)
    dev = snapshot.devices[snapshot.device_or_default(device)]
    report = find_cycles(snapshot, dev, depth)
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


def diff_snapshots(store: SnapshotStore, a: str, b: str, device: int | None = None, device_a: int | None = None,
                   device_b: int | None = None, at_a: int | None = None, at_b: int | None = None, depth: int = 1,
                   top: int = 30, include_unchanged: bool = False, progress: Progress = None) -> Answer:
    top, depth = valid_limit(top), valid_depth(depth)
    first = store.open(a, progress)
    second = store.open(b, progress)
    view_a = side(first, device_a if device_a is not None else device, at_a, depth)
    view_b = side(second, device_b if device_b is not None else device, at_b, depth)
    result = diff_views(view_a, view_b)
    data = result.to_json()
    sites = [s for s in data["sites"] if include_unchanged or s["status"] != "same"]
    omitted: dict = {}
    if len(sites) > top:
        # The largest growth and the largest shrink are both worth seeing: keep both ends.
        omitted["sites"] = len(sites) - top
        sites = sites[: top - top // 2] + sites[len(sites) - top // 2:]
    data["sites"] = sites
    for key in ("new", "gone"):
        cut(data, key, top, omitted)
    f = format_bytes
    lines = [f"A: {view_a.name}  ->  B: {view_b.name}",
             f"reserved {f(view_a.reserved)} -> {f(view_b.reserved)} ({signed_bytes(data['delta_reserved'])}), "
             f"allocated {f(view_a.allocated)} -> {f(view_b.allocated)} ({signed_bytes(data['delta_allocated'])})"]
    changed = [s for s in result.sites if s.status != "same"]
    lines.append(f"{plural(len(changed), 'call site')} changed ({len(result.new)} new, {len(result.gone)} gone)")
    for s in changed[:3]:
        lines.append(f"  {signed_bytes(s.delta_bytes)} ({s.status}) {s.site}")
    return bounded(lines, data, omitted, f"call again with a larger top (at most {MAX_LIMIT})")


def compare_ranks(store: SnapshotStore, inputs: list[str], at: str = "peak", depth: int = 1, limit: int = 64,
                  progress: Progress = None) -> Answer:
    limit, depth = valid_limit(limit), valid_depth(depth)
    if at not in ("peak", "end"):
        raise UsageError(f"at: {at!r} is neither 'peak' nor 'end'")
    if not inputs:
        raise UsageError("inputs: give rank snapshot files or a directory of them")
    named = [store.resolve(item, directory_too=True) for item in inputs]
    # A directory's files are checked too: a link in it may point outside the roots.
    files = [store.resolve(file) for file in find_rank_files(named)]
    runner = local_runner(max(1, min(default_workers(), len(files))))
    report = None if progress is None else (lambda done, total, failed: progress("ranks", done, total))
    try:
        summaries = summarize_files(files, depth=depth, progress=report,
                                    cache=default_summary_cache(store.cache), runner=runner)
    finally:
        runner.close()
    data = ranks_json(summaries, at)
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


# memory_breakdown lives in memtui.mcp.breakdown: it needs memtui.commands.breakdown.


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


def bounded(lines: list[str], data: dict, omitted: dict, more: str) -> Answer:
    data["truncated"] = bool(omitted)
    if omitted:
        data["omitted"] = omitted
        data["more"] = more
        lines.append(f"truncated ({', '.join(f'{n:,} {k}' for k, n in omitted.items())} left out): {more}")
    return Answer("\n".join(lines), data)


def cut(data: dict, key: str, limit: int, omitted: dict, name: str | None = None) -> None:
    items = data.get(key)
    if isinstance(items, list) and len(items) > limit:
        omitted[name or key] = len(items) - limit
        data[key] = items[:limit]


def valid_limit(value: int) -> int:
    if not 1 <= value <= MAX_LIMIT:
        raise UsageError(f"limit must be between 1 and {MAX_LIMIT} (page with start/offset for more)")
    return value


def valid_offset(value: int) -> int:
    if value < 0:
        raise UsageError("offset must be 0 or more")
    return value


def valid_depth(value: int) -> int:
    if not 1 <= value <= 100:
        raise UsageError("depth must be between 1 and 100")
    return value


def valid_size(value: int | str | None) -> int | None:
    if value is None:
        return None
    size = value if isinstance(value, int) else parse_size(str(value))
    if size is None or size <= 0:
        raise UsageError(f"device_memory: not a size: {value!r} (try '80GiB' or 85899345920)")
    return size
