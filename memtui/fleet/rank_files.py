"""Finding rank files and summarising them in parallel worker processes.

Each worker opens one file at a time and sends back only its summary (kilobytes), so
the parent never holds more than the summaries. Workers are bounded by the cores and
by the number of files; one file is summarised in-process, which avoids starting a
pool for nothing. The work itself is spread by :mod:`memtui.fleet.collect` on a runner
(:mod:`memtui.fleet.runners`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from memtui.analysis.ranks import rank_from_name
from memtui.cores import usable_cores
from memtui.errors import UsageError
from memtui.fleet.collect import collect_summaries
from memtui.fleet.runners import local_runner

SNAPSHOT_SUFFIXES = (".pickle", ".pkl", ".pt", ".msgpack", ".mpk")
COMPRESSED_SUFFIXES = ("", ".gz", ".xz", ".bz2", ".zst")

ProgressFn = Callable[[int, int, int], None]  # done, total, failed


def find_rank_files(inputs: Iterable[str]) -> list[str]:
    """Files named on the command line, and the snapshot files inside named directories."""
    files: list[str] = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, name) for name in os.listdir(item) if is_snapshot_name(name))
            if not found:
                raise UsageError(f"{item}: no snapshot files (*.pickle, *.pickle.xz, ...) in this directory")
            files.extend(found)
        else:
            files.append(item)
    if not files:
        raise UsageError("no snapshot files given")
    return sorted(dict.fromkeys(files), key=_rank_order)


def is_snapshot_name(name: str) -> bool:
    return any(name.endswith(s + c) for s in SNAPSHOT_SUFFIXES for c in COMPRESSED_SUFFIXES)


def _rank_order(path: str) -> tuple:
    rank = rank_from_name(path)
    return (rank is None, rank if rank is not None else 0, path)


def default_workers() -> int:
    return usable_cores()


def summarize_files(paths: list[str], workers: int | None = None, depth: int = 1,
                    progress: ProgressFn | None = None, *, cache=None, runner=None) -> list[dict]:
    """Summaries of ``paths``, in the same order; a file that fails gives an error summary.

    ``cache`` (a :class:`memtui.cache.summaries.SummaryCache`) supplies and keeps
    summaries of unchanged files; ``runner`` (see :mod:`memtui.fleet.runners`) replaces
    the local pool, e.g. with a Dask cluster, and is left open for the caller to close.
    """
    own_runner = runner is None
    if own_runner:
        runner = local_runner(max(1, min(workers or default_workers(), len(paths))))
    try:
        return collect_summaries(paths, depth, runner, cache, progress)
    finally:
        if own_runner:
            runner.close()
