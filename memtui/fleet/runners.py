"""Where the per-file work runs: in this process, or in a pool of local processes.

A runner's :meth:`map_unordered` calls ``fn`` on each item and yields ``(position,
result)`` as each finishes, in any order; a call that raised (or whose worker died)
yields the exception as its result, so one lost file never stops the others.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Protocol

Outcome = Iterator[tuple[int, object]]


class Runner(Protocol):
    workers: int
    description: str

    def map_unordered(self, fn: Callable, items: Sequence) -> Outcome: ...

    def close(self) -> None: ...


class InProcessRunner:
    """One file after the other, here: no process to start for a handful of small files."""

    workers = 1
    description = "in this process"

    def map_unordered(self, fn: Callable, items: Sequence) -> Outcome:
        for i, item in enumerate(items):
            try:
                yield i, fn(item)
            except Exception as exc:  # reported as that file's failure
                yield i, exc

    def close(self) -> None:
        pass


class ProcessPoolRunner:
    """Worker processes on this machine, started when first needed."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.description = f"{workers} local worker processes"
        self._pool: ProcessPoolExecutor | None = None

    def map_unordered(self, fn: Callable, items: Sequence) -> Outcome:
        if self._pool is None:
            # Spawned, not forked: the caller may have threads (the TUI), which a forked
            # child would inherit in whatever state they were.
            context = multiprocessing.get_context("spawn")
            start_resource_tracker()
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result()
                except Exception as exc:  # a worker that died (out of memory, killed)
                    yield futures[future], exc
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def start_resource_tracker() -> None:
    """Start multiprocessing's helper process now, with the real stderr.

    multiprocessing starts it on first use and hands it ``sys.stderr``'s descriptor; inside
    the terminal UI ``sys.stderr`` is a capture object whose descriptor is -1, and starting
    any worker process would then fail. Once running, the helper is reused.
    """
    from multiprocessing import resource_tracker

    try:
        usable = sys.stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = False
    if usable or sys.__stderr__ is None:
        return
    captured, sys.stderr = sys.stderr, sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = captured


def local_runner(workers: int) -> Runner:
    return InProcessRunner() if workers <= 1 else ProcessPoolRunner(workers)
