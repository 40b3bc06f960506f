"""memtui oom: why each OOM in a snapshot happened."""

from __future__ import annotations

from memtui.analysis.oom import WORTH_COUNTING, OomDiagnosis, diagnose_ooms
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth, site_lines, size_argument
from memtui.units import format_bytes

LARGEST_SHOWN = 5

NAME = "oom"
HELP = ("Explain every OOM in a snapshot: fragmentation, capacity, a per-process cap or non-PyTorch memory, with"
        " the evidence, and who holds the memory.")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    add_device_option(parser)
    parser.add_argument("--device-memory", type=size_argument, default=None, metavar="SIZE",
                        help="the GPU's total memory (e.g. 80GiB); estimated from common GPUs when not given")
    parser.add_argument("--top", type=int, default=10, help="call sites and allocations to list (default 10)")
    add_depth_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    device = device_or_error(snapshot, args.device)
    found = diagnose_ooms(snapshot, device, args.device_memory, check_depth(args.depth), max(args.top, 0))
    if args.json:
        print_json({"device": device, "ooms": [d.to_json() for d in found]})
        return 0
    if not found:
        print(f"device {device}: no OOM in this snapshot's trace")
        return 0
    for n, diagnosis in enumerate(found, 1):
        if n > 1:
            print()
        print("\n".join(render(diagnosis, n, len(found))))
    return 0


def render(d: OomDiagnosis, n: int = 1, total: int = 1, with_sites: bool = True) -> list[str]:
    """The report of one OOM; without the call-site lists when a table shows them."""
    f = format_bytes
    lines = [
        f"OOM {n} of {total}: device {d.device}, event {d.index:,}",
        f"  requested      {f(d.requested):>11}   ({d.pool} pool, stream {d.stream})",
        f"  device free    {f(d.device_free):>11}",
        f"  reserved       {f(d.reserved):>11}   allocated {f(d.allocated)}   active {f(d.active)}",
        f"  cached free    {f(d.cached_free):>11}   usable for this request {f(d.usable_free)},"
        f" largest free block in the {d.pool} pool (stream {d.stream}) {f(d.largest_free_block)}",
        f"  verdict: {d.verdict} ({d.confidence} confidence; the limit: {d.limit})",
    ]
    lines += ["  " + line for line in evidence_lines(d) + explain(d)]
    if d.site:
        lines.append(f"  requested at: {d.site['site']}")
    if d.top_sites and with_sites:
        lines.append("  call sites holding memory at the OOM:")
        lines += site_lines(d.top_sites, "    ")
    if d.verdict in ("capacity", "process_cap") and d.largest_allocations and with_sites:
        lines.append("  largest live allocations:")
        for a in d.largest_allocations[:LARGEST_SHOWN]:
            lines.append(f"    {f(a['size']):>11}  {a['address_n'] or '(untraced)':<20} {a['site']}")
    return lines


def evidence_lines(d: OomDiagnosis) -> list[str]:
    """The evidence behind the verdict and the alternatives weighed."""
    out = ["because:"] + [f"  - {e.text}" for e in d.evidence]
    if d.alternatives:
        out.append("also considered:")
        out += [f"  - {a['verdict']}: {a['why']}" for a in d.alternatives]
    return out


def explain(d: OomDiagnosis) -> list[str]:
    """What to do about it, and how the device's size was known."""
    f = format_bytes
    out = []
    if d.verdict == "fragmentation":
        if d.expandable_already:
            out.append("Expandable segments are already on: free the long-lived blocks that split the segments, or"
                       " try a smaller max_split_size_mb.")
        else:
            out.append("Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or free the long-lived blocks that"
                       " split the segments.")
    elif d.verdict == "external":
        out.append("Free the device of the other user (another process, NCCL buffers, cuBLAS workspaces), or give"
                   " the real total with --device-memory if the estimate is wrong.")
    elif d.verdict == "process_cap":
        out.append("Raise the cap (torch.cuda.set_per_process_memory_fraction) or bound the growing work (the"
                   " batch); " + ("expandable segments would let the pinned free memory be reused."
                                  if d.pinned and d.pinned.get("free", 0) >= d.requested * WORTH_COUNTING
                                  and not d.expandable_already else
                                  "see the call sites below for what the step holds."))
    elif d.process_limit:
        out.append("Reduce what is live at this point (see below), or raise the cap.")
    else:
        short = d.requested - d.usable_free - d.device_free
        out.append(f"Short by {f(max(short, 0))} even as one block: reduce what is live at this point (see below).")
    if d.device_total is not None and not d.process_limit and d.verdict != "external":
        # The snapshot does not record the device's size; say how the figure was made and
        # where to give the real one (the explorer has no such option: the CLI does).
        estimate = (" (estimated: the snapshot does not record it; the smallest common GPU size above"
                    " reserved + device free)") if d.device_total_estimated else ""
        out.append(f"Device total {f(d.device_total)}{estimate}: {f(d.non_pytorch or 0)} in use outside PyTorch.")
        if d.device_total_estimated:
            out.append("For the real total: memtui oom SNAPSHOT --device-memory SIZE (e.g. 80GiB).")
    return out
