"""Finding rank files and summarising them in parallel worker processes.

Each worker opens one file at a time and sends back only its summary (kilobytes), so
the parent never holds more than the summaries. Workers are bounded by the cores and
by the number of files; one file is summarised in-process, which avoids starting a
pool for nothing.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial

from memtui.analysis.ranks import rank_from_name, rank_summary
from memtui.errors import UsageError

SNAPSHOT_SUFFIXES = (".pickle", ".pkl", ".pt", ".msgpack", ".mpk")
COMPRESSED_SUFFIXES = ("", ".gz", ".xz", ".bz2", ".zst")

ProgressFn = Callable[[int, int, int], None]  # done, total, failed


def find_rank_files(inputs: Iterable[str]) -> list[str]:
    """Files named on the command line, and the snapshot files inside named directories."""
    files: list[str] = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, name) for name in os.listdir(item) if _is_snapshot_name(name))
            if not found:
                raise UsageError(f"{item}: no snapshot files (*.pickle, *.pickle.xz, ...) in this directory")
            files.extend(found)
        else:
            files.append(item)
    if not files:
        raise UsageError("no snapshot files given")
    return sorted(dict.fromkeys(files), key=_rank_order)


def _is_snapshot_name(name: str) -> bool:
    return any(name.endswith(s + c) for s in SNAPSHOT_SUFFIXES for c in COMPRESSED_SUFFIXES)


def _rank_order(path: str) -> tuple:
    rank = rank_from_name(path)
    return (rank is None, rank if rank is not None else 0, path)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def summarize_files(paths: list[str], workers: int | None = None, depth: int = 1,
                    progress: ProgressFn | None = None) -> list[dict]:
    """Summaries of ``paths``, in the same order; a file that fails gives an error summary."""
    workers = max(1, min(workers or default_workers(), len(paths)))
    results: list[dict | None] = [None] * len(paths)
    failed = 0
    if progress:
        progress(0, len(paths), 0)
    if workers == 1:
        for i, path in enumerate(paths):
            results[i] = rank_summary(path, depth)
            failed += bool(results[i].get("error"))
            if progress:
                progress(i + 1, len(paths), failed)
        return results  # type: ignore[return-value]
    # Spawned workers: the caller may have threads (the TUI), which a forked child would inherit broken.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(partial(rank_summary, depth=depth), path): i for i, path in enumerate(paths)}
        for done, future in enumerate(as_completed(futures), 1):
            i = futures[future]
            try:
                results[i] = future.result()
            except Exception as exc:  # a worker that died (out of memory, killed) is one failed file
                results[i] = {"file": paths[i], "rank": rank_from_name(paths[i]),
                              "error": f"worker failed: {type(exc).__name__}: {exc}"}
            failed += bool(results[i].get("error"))
            if progress:
                progress(done, len(paths), failed)
    return results  # type: ignore[return-value]
