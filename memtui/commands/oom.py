"""memtui oom: why each OOM in a snapshot happened."""

from __future__ import annotations

from memtui.analysis.oom import OomDiagnosis, diagnose_ooms
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, check_depth, site_lines, size_argument
from memtui.units import format_bytes

LARGEST_SHOWN = 5

NAME = "oom"
HELP = "Explain every OOM in a snapshot: fragmentation, capacity or non-PyTorch memory, and who holds the memory."


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--device", type=int, default=None, help="only this device")
    parser.add_argument("--device-memory", type=size_argument, default=None, metavar="SIZE",
                        help="the GPU's total memory (e.g. 80GiB); estimated from common GPUs when not given")
    parser.add_argument("--top", type=int, default=10, help="call sites and allocations to list (default 10)")
    add_depth_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    if args.device is not None:
        device_or_error(snapshot, args.device)
    found = diagnose_ooms(snapshot, args.device, args.device_memory, check_depth(args.depth), max(args.top, 0))
    if args.json:
        print_json([d.to_json() for d in found])
        return 0
    if not found:
        print(f"{snapshot.name}: no OOM in this snapshot")
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
        f"  verdict: {d.verdict}" + (" under a per-process memory limit" if d.process_limit else ""),
    ]
    lines += ["  " + line for line in explain(d)]
    if d.site:
        lines.append(f"  requested at: {d.site['site']}")
    if d.top_sites and with_sites:
        lines.append("  call sites holding memory at the OOM:")
        lines += site_lines(d.top_sites, "    ")
    if d.verdict == "capacity" and d.largest_allocations and with_sites:
        lines.append("  largest live allocations:")
        for a in d.largest_allocations[:LARGEST_SHOWN]:
            lines.append(f"    {f(a['size']):>11}  {a['address_n'] or '(untraced)':<20} {a['site']}")
    return lines


def explain(d: OomDiagnosis) -> list[str]:
    f = format_bytes
    out = []
    if d.process_limit:
        out.append(f"The device had {f(d.device_free)} free, more than the request: a per-process cap refused it")
        out.append("(torch.cuda.set_per_process_memory_fraction). The cap is at least "
                   f"{f(d.cap_at_least)} and below {f(d.cap_below)} (reserved + the segment this request needed).")
    if d.verdict == "fragmentation":
        out.append(f"Enough memory was free ({f(d.fits_with_expandable)} usable), but no free block held "
                   f"{f(d.requested)}: the largest in the {d.pool} pool was {f(d.largest_free_block)}.")
        if d.expandable_already:
            out.append("expandable_segments is already on: try freeing the long-lived blocks that split the"
                       " segments, or a smaller max_split_size_mb.")
        else:
            out.append("Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: requests up to about "
                       f"{f(d.fits_with_expandable)} would then fit.")
    elif d.verdict == "external":
        out.append(f"{f(d.non_pytorch)} of device memory is used outside PyTorch's allocator (other processes,"
                   " NCCL, CUDA context); without it the request would have fit.")
    elif d.process_limit:
        out.append("No room under the cap even if every usable free byte were one block: reduce what is live"
                   " at this point (see below) or raise the cap.")
    else:
        short = d.requested - d.usable_free - d.device_free
        out.append(f"Not enough memory even if every free byte were one block: short by {f(max(short, 0))}."
                   " Reduce what is live at this point (see below).")
    if d.device_total is not None and not d.process_limit and d.verdict != "external":
        # The snapshot does not record the device's size; say how the figure was made and
        # where to give the real one (the explorer has no such option: the CLI does).
        estimate = (" (estimated: the snapshot does not record it; the smallest common GPU size above"
                    " reserved + device free)") if d.device_total_estimated else ""
        out.append(f"Device total {f(d.device_total)}{estimate}: {f(d.non_pytorch or 0)} in use outside PyTorch.")
        if d.device_total_estimated:
            out.append("For the real total: memtui oom SNAPSHOT --device-memory SIZE (e.g. 80GiB).")
    if d.held_by_cycles:
        out.append(f"{f(d.held_by_cycles)} of what was live was freed later by the garbage collector in one burst:"
                   " memory held by reference cycles (see memtui cycles).")
    if d.released_before:
        out.append(f"Just before, the allocator released {f(d.released_before)} of cached segments to retry.")
    return out
