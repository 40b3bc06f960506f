"""Work on a long column a slice of rows at a time, the slices on the cores the process may
use: numpy lets go of the GIL inside each call, so a pass over ten million rows that one
thread makes in 20-40 ms is shared by the cores (model/trace_figures.py, the model's columns
in memtui/open.py). Small slices also bound what a task allocates."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from memtui.cores import each_on_threads, usable_cores

# Rows a task takes (the tests make it small, to cut the columns anywhere). On 16 cores at 10M
# events, slices of 1M rows took 30 ms for the trace's figures where slices of 256K took 41
# (each numpy call of a task takes the GIL to start); a task's bincount then holds 8 MB.
SLICE_ROWS = 1 << 20

_Result = TypeVar("_Result")


def slice_bounds(rows: int) -> list[tuple[int, int]]:
    """(start, stop) of each run of :data:`SLICE_ROWS` of ``rows`` rows, in order."""
    return [(start, min(start + SLICE_ROWS, rows)) for start in range(0, rows, SLICE_ROWS)]


def on_cores(tasks: list[Callable[[], _Result]]) -> list[_Result]:
    """Each task's result, in order; the tasks on threads where there is more than one task
    and more than one core."""
    workers = min(len(tasks), usable_cores())
    if workers <= 1:
        return [task() for task in tasks]
    return each_on_threads(lambda task: task(), tasks, workers, "memtui-slice")


def on_slices(rows: int, task: Callable[[int, int], _Result]) -> list[_Result]:
    """``task(start, stop)`` for each slice of ``rows`` rows (:func:`slice_bounds`), in order,
    on the process's cores."""
    return on_cores([partial(task, start, stop) for start, stop in slice_bounds(rows)])
