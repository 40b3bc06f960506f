"""memtui ranks: the generated command (memtui.services.ranks), with the command line's own workers,
Dask cluster and --tui."""

from __future__ import annotations

import os
import sys
import time

from memtui.cache.summaries import default_summary_cache
from memtui.commands._analysis import add_spec_arguments, print_result, spec_options
from memtui.commands._arguments import add_json_flag
from memtui.errors import UsageError
from memtui.fleet.rank_files import default_workers, find_rank_files
from memtui.fleet.runners import local_runner
from memtui.services.catalog import spec

SPEC = spec("ranks")
NAME = SPEC.name
HELP = SPEC.help
SCHEDULER_ENV = "MEMTUI_DASK_SCHEDULER"


def add_arguments(parser) -> None:
    add_spec_arguments(parser, SPEC)
    parser.add_argument("--workers", type=int, default=None,
                        help=f"worker processes (default: one per core, here {default_workers()})")
    parser.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help="compute the summaries on a Dask cluster whose workers see these files: a scheduler "
                             "address (tcp://host:8786), or local:N for N local worker processes "
                             f"(default: ${SCHEDULER_ENV} if set; needs pip install 'memtui[cluster]')")
    add_json_flag(parser)
    parser.add_argument("--tui", action="store_true",
                        help="browse the ranks in the explorer; Enter opens a rank's snapshot")


def run(args) -> int:
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.tui and args.json:
        raise UsageError("--tui and --json do not go together")
    options = spec_options(SPEC, args)
    if args.cluster and args.workers is not None:
        raise UsageError("--workers is for local worker processes; a --cluster brings its own workers")
    # The scheduler in the environment is a default: asking for local workers overrides it.
    cluster = args.cluster or (os.environ.get(SCHEDULER_ENV) if args.workers is None else None) or None
    files = find_rank_files(args.inputs)
    cache = default_summary_cache(args.model_cache)
    runner = open_runner(cluster, args.workers, len(files))
    try:
        if args.tui:
            return args.front_ends.browse_ranks(files, options.depth, runner, cache, options.at)
        progress = ProgressLine() if sys.stderr.isatty() else None
        try:
            result = SPEC.service(files, options, runner, cache, progress)
        finally:
            if progress:  # before any error message, which would otherwise share its line
                progress.clear()
    finally:
        runner.close()
    if not result.data["ranks"] and not args.json:  # one line, and no empty table (--json still lists why)
        failed = result.data["failed"]
        first = f" ({failed[0]['error']}" + \
            (f"; and {len(failed) - 1:,} more)" if len(failed) > 1 else ")") if failed else ""
        raise UsageError(f"no rank file could be read{first}")
    print_result(result, args.json)
    if sys.stderr.isatty() and cache is not None and cache.hits:
        print(f"memtui: {cache.hits:,} of {len(files):,} summaries from the cache in {cache.folder}", file=sys.stderr)
    if not result.data["ranks"]:
        raise UsageError("no rank file could be read")
    return 0


def open_runner(cluster: str | None, workers: int | None, files: int):
    """Where the summaries are computed: a Dask cluster, else local processes bounded by cores."""
    if cluster:
        from memtui.fleet.dask_runner import DaskRunner

        return DaskRunner(cluster)
    return local_runner(max(1, min(workers or default_workers(), files)))


class ProgressLine:
    """``ranks: 12/64 files (1 failed)`` on stderr, redrawn at most ten times a second."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        width = 24
        filled = width * done // max(total, 1)
        failures = f" ({failed} failed)" if failed else ""
        sys.stderr.write(f"\r\x1b[2Kranks [{'#' * filled}{'.' * (width - filled)}] {done}/{total} files{failures}")
        sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
