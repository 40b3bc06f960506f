"""memtui watch [TARGET]: the memory of a running job, live (jobs started with memtui run --live,
memtui.record.live() or MEMTUI_LIVE=1)."""

from __future__ import annotations

import json

from memtui.errors import UsageError
from memtui.live.client import read_status
from memtui.live.runtime import list_jobs, runtime_dir, select_jobs
from memtui.live.views import duration
from memtui.units import format_bytes

NAME = "watch"
HELP = ("Watch a running job's CUDA memory live: the timeline, the segment map, the event log's tail and "
        "the top call sites as they change; freeze a snapshot without stopping the job. Jobs serve themselves "
        "with 'memtui run --live', memtui.record.live() or MEMTUI_LIVE=1. TARGET: a pid, PID:RANK, a job id, "
        "a socket path or a word of the command line (default: every live job: one opens at once, with all its "
        "ranks; several are listed to pick from).")


def add_arguments(parser) -> None:
    parser.add_argument("target", nargs="?", help="which job (default: the only one, or a list to pick from)")
    parser.add_argument("--list", action="store_true", help="list the live jobs and exit")
    parser.add_argument("--status", action="store_true", help="print each job's memory now and exit")
    parser.add_argument("--json", action="store_true", help="with --list or --status: JSON")
    saves = parser.add_mutually_exclusive_group()
    saves.add_argument("--out", default=".", metavar="DIR", help="where frozen and saved snapshots go (default: .)")
    saves.add_argument("--no-save", action="store_true",
                       help="write no file: a freeze opens in the explorer only (memtui serve --watch uses it)")


def job_rows(jobs) -> list[dict]:
    return [{"pid": j.pid, "rank": j.rank, "devices": j.devices, "running_seconds": round(j.running_for(), 1),
             "job": j.job, "argv": j.argv, "socket": j.socket} for j in jobs]


def run(args) -> int:
    folder = runtime_dir(create=False)
    jobs = list_jobs(folder)
    chosen = select_jobs(jobs, args.target) if args.target else jobs
    if args.list:
        if args.json:
            print(json.dumps(job_rows(chosen), indent=2))
        else:
            print_list(chosen, folder)
        return 0
    if not jobs:
        raise UsageError(f"no live jobs in {folder}: start one with 'memtui run --live script.py', "
                         "memtui.record.live() or MEMTUI_LIVE=1")
    if args.target and not chosen:
        raise UsageError(f"no live job matches {args.target!r}; 'memtui watch --list' shows them")
    if args.status:
        statuses = [read_status(j) for j in chosen]
        if args.json:
            print(json.dumps(statuses, indent=2))
        else:
            for s in statuses:
                for d in s["devices"]:
                    rank = f" rank {s['rank']}" if s["rank"] is not None else ""
                    headroom = format_bytes(d["headroom"]) if d["headroom"] is not None else "?"
                    print(f"pid {s['pid']}{rank} device {d['device']}: allocated {format_bytes(d['allocated'])}, "
                          f"reserved {format_bytes(d['reserved'])}, headroom {headroom}")
        return 0
    return args.front_ends.watch(chosen, None if args.no_save else args.out)


def print_list(jobs, folder: str) -> None:
    if not jobs:
        print(f"no live jobs in {folder}")
        return
    print(f"{'PID':>8} {'RANK':>4} {'DEVICE':>6} {'RUNNING':>8}  COMMAND")
    for j in jobs:
        rank = "-" if j.rank is None else str(j.rank)
        devices = ",".join(map(str, j.devices)) or "?"
        print(f"{j.pid:>8} {rank:>4} {devices:>6} {duration(j.running_for()):>8}  {' '.join(j.argv)}")
