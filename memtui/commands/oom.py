"""memtui oom: why each OOM in a snapshot happened."""

from __future__ import annotations

from memtui.analysis.oom import OomDiagnosis, diagnose_ooms
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth, print_report, size_argument
from memtui.report.oom import diagnosis_sections, oom_report
from memtui.report.oom import explain as explain  # memtui.mcp and the tests take it from here
from memtui.report.sections import Report
from memtui.report.text import text_lines

NAME = "oom"
HELP = ("Explain every OOM in a snapshot: fragmentation, capacity, a per-process cap or non-PyTorch memory, with"
        " the evidence, and who holds the memory.")
LARGEST_SHOWN = 5  # live allocations in the text, past the call sites


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
    print_report(oom_report(device, found, LARGEST_SHOWN))
    return 0


def render(d: OomDiagnosis, n: int = 1, total: int = 1) -> list[str]:
    """The report of one OOM as text."""
    return text_lines(Report("", diagnosis_sections(d, n, total, LARGEST_SHOWN)))
