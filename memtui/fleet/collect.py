"""Summaries of many rank files: from the cache where it has them, from workers otherwise.

The cache keys are taken here, in a few threads (it is mostly waiting on the file system),
before any worker starts: a second run over unchanged files starts no worker at all.
Each summary that comes back is stored at once, so an interrupted run keeps what it did.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from memtui.analysis.ranks import rank_from_name
from memtui.cache.summaries import SummaryCache, summary_key
from memtui.fleet.runners import Runner
from memtui.fleet.task import keyed_summary

ProgressFn = Callable[[int, int, int], None]  # done, total, failed
KEY_THREADS = 16


def collect_summaries(paths: list[str], depth: int, runner: Runner, cache: SummaryCache | None = None,
                      progress: ProgressFn | None = None) -> list[dict]:
    """Summaries of ``paths`` in the same order; a file that fails gives an error summary."""
    total = len(paths)
    results: list[dict | None] = [None] * total
    done = failed = 0
    if progress:
        progress(0, total, 0)
    if cache is not None and not cache.disabled:
        for i, key in enumerate(_keys(paths, depth)):
            if key is not None:
                results[i] = cache.load(key, paths[i])
        done = sum(r is not None for r in results)
        if progress and done:
            progress(done, total, 0)
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        task = partial(keyed_summary, depth=depth)
        # Absolute paths: a worker on another machine does not share this one's directory.
        for j, outcome in runner.map_unordered(task, [os.path.abspath(paths[i]) for i in todo]):
            i = todo[j]
            if isinstance(outcome, BaseException):
                summary = worker_failure(paths[i], outcome)
            else:
                key, summary = outcome
                summary = {**summary, "file": paths[i]}  # named as the caller named it
                if cache is not None and key is not None:
                    cache.store(key, summary)
            results[i] = summary
            done += 1
            failed += bool(summary.get("error"))
            if progress:
                progress(done, total, failed)
    if cache is not None and cache.written:
        cache.prune()
    return results  # type: ignore[return-value]


def worker_failure(path: str, exc: BaseException) -> dict:
    """The summary of a file whose worker raised or died (out of memory, killed)."""
    return {"file": path, "rank": rank_from_name(path), "error": f"worker failed: {type(exc).__name__}: {exc}"}


def _keys(paths: list[str], depth: int) -> list[str | None]:
    if len(paths) <= 4:
        return [_key_or_none(p, depth) for p in paths]
    with ThreadPoolExecutor(max_workers=min(KEY_THREADS, len(paths))) as pool:
        return list(pool.map(partial(_key_or_none, depth=depth), paths))


def _key_or_none(path: str, depth: int) -> str | None:
    try:
        return summary_key(path, depth)
    except OSError:
        return None  # the worker reports why the file cannot be read
