"""``memtui run script.py [args...]``: run a script with CUDA memory recording on."""

from __future__ import annotations

import argparse

from memtui.commands._argtypes import positive_int
from memtui.errors import UsageError

NAME = "run"
HELP = (
    "Run a Python script like 'python script.py args', recording CUDA memory: a snapshot is "
    "written at the first CUDA out-of-memory error and at exit. Needs PyTorch with CUDA (NVIDIA, or AMD "
    "through a ROCm build). Other accelerators (XPU, NPU, MPS) are not recorded by memtui run: record with "
    "torch.<device>.memory._record_memory_history and _dump_snapshot, then open the file with memtui."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=".", metavar="DIR", help="directory for the snapshots (default: .)")
    parser.add_argument(
        "--max-entries", type=positive_int, default=100_000, metavar="N",
        help="keep the last N allocator events (default: 100000)",
    )
    parser.add_argument(
        "--stacks", choices=("python", "all"), default="python",
        help="python: Python frames only (default); all: also C++ frames (slower)",
    )
    parser.add_argument(
        "--context", choices=("all", "alloc", "state"), default="all",
        help="which events keep a stack: all (default), alloc (allocations only), state (live blocks only)",
    )
    parser.add_argument(
        "--steps", metavar="A:B",
        help="record only steps A to B-1, counted by memtui.record.step() calls in the script",
    )
    parser.add_argument(
        "--on-oom-only", action="store_true",
        help="write a snapshot only if CUDA runs out of memory, not at exit",
    )
    parser.add_argument(
        "--live", action="store_true",
        help="also serve the memory to 'memtui watch' while the script runs (a private Unix socket)",
    )
    # One REMAINDER positional rather than `script` + `args`: argparse would drop a `--` that
    # belongs to the script's own arguments, and the script must see exactly what it was given.
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="script.py",
        help="the Python script to run, then its arguments (passed on unchanged)",
    )


def split_command(command: list[str]) -> tuple[str, list[str]]:
    """``['train.py', '--lr', '1']`` -> ``('train.py', ['--lr', '1'])``; a leading ``--`` is ours."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("memtui run needs a script: memtui run [options] script.py [args...]")
    return command[0], command[1:]


def run(args: argparse.Namespace) -> int:
    # Imported here: the recording code needs torch, and `memtui` itself must start without it.
    from memtui.record.runner import RunOptions, run_script
    from memtui.record.steps import parse_steps

    script, script_args = split_command(args.command)
    step_range = parse_steps(args.steps) if args.steps is not None else None
    return run_script(
        RunOptions(
            script=script,
            args=script_args,
            out=args.out,
            max_entries=args.max_entries,
            stacks=args.stacks,
            context=args.context,
            steps=step_range,
            on_oom_only=args.on_oom_only,
            live=args.live,
        )
    )
