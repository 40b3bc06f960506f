"""How many cores this process may use: those it may run on (``taskset`` and cgroup cpusets
are respected), not the machine's count."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_Item = TypeVar("_Item")


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def spare_cores() -> int:
    """The cores for work that runs beside the main thread's own (the imports, the explorer's
    first screen): every one but one where there are several, so that the main thread keeps
    a core and the work does not add the cost of its threads to a machine already busy."""
    return max(1, usable_cores() - 1)


def each_on_threads(task: Callable[[_Item], T], items: list[_Item], threads: int, name: str) -> list[T]:
    """``task`` of each item, in order, on ``threads`` daemon threads named ``name`` that take
    the next item as they finish one; the first exception a task raised is raised here once
    they are done. Plain threads rather than a pool from concurrent.futures: that module and
    the logging it imports took 8.5 ms of a cold ``memtui info``'s imports (130 ms), and daemon
    threads do not hold up the end of a process that ends on a signal."""
    results: list = [None] * len(items)
    errors: list[BaseException] = []
    order = iter(range(len(items)))  # shared: each thread takes the next index (atomic)

    def work() -> None:
        for i in order:
            try:
                results[i] = task(items[i])
            except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
                errors.append(exc)
                return

    started = [threading.Thread(target=work, name=name, daemon=True) for _ in range(max(1, min(threads, len(items))))]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    if errors:
        raise errors[0]
    return results


# The compiled pairing of allocations with their frees (src/memtui_native/lifetimes.c) splits
# the addresses between threads, each with at least this many events: below it a thread's
# own passes cost more than it saves. A million events pair in 37 ms on one thread and 27-31
# ms on two; a cold 1M-event `info` on 2 cores, 40 pairs: 0.98x with two (the pairing is
# what the model waits for, on a core the main thread leaves idle).
EVENTS_PER_PAIRING_THREAD = 1 << 18


def pairing_threads(events: int) -> int:
    """Threads the compiled pairing uses for a trace of ``events`` events."""
    return max(1, min(usable_cores(), events // EVENTS_PER_PAIRING_THREAD))


# How much lower than the thread that draws the explorer's screen the work it does after its
# first screen runs: 10 steps, a tenth of the CPU share when both want a core.
AFTER_THE_ANSWER_NICE = 10


def run_after_the_answer() -> None:
    """Lower the calling thread's CPU priority: the work it does next comes after the answer
    (the explorer's cache writes, its time-travel index), and must not take the cores from
    the thread that draws the screen while keys are typed. Threads it starts inherit the
    priority. Only on Linux, where a thread's priority is its own; an error (a sandbox)
    leaves it as it was."""
    if not sys.platform.startswith("linux"):
        return
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, max(os.getpriority(os.PRIO_PROCESS, thread), AFTER_THE_ANSWER_NICE))
    except OSError:
        pass


def after_the_answer(work: Callable[[], T]) -> T:
    """``work()`` on a thread of its own at the priority of :func:`run_after_the_answer`,
    waited for: the caller's thread (a worker pool's, used again for other work) keeps its
    own priority."""
    result: list[T] = []
    failure: list[BaseException] = []

    def lowered() -> None:
        run_after_the_answer()
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=lowered, name="memtui-after-the-answer", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
