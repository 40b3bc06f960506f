"""Work on a long column a slice of rows at a time, the slices on the cores the process may
use: numpy lets go of the GIL inside each call, so a pass over ten million rows that one
thread makes in 20-40 ms is shared by the cores (model/trace_figures.py, the model's columns
in memtui/open.py). Small slices also bound what a task allocates."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from memtui.cores import usable_cores

# Rows a task takes (the tests make it small, to cut the columns anywhere). On 16 cores at 10M
# events, slices of 1M rows took 30 ms for the trace's figures where slices of 256K took 41
# (each numpy call of a task takes the GIL to start); a task's bincount then holds 8 MB.
SLICE_ROWS = 1 << 20

_Result = TypeVar("_Result")


def on_slices(rows: int, task: Callable[[int, int], _Result]) -> list[_Result]:
    """``task(start, stop)`` for each run of :data:`SLICE_ROWS` of ``rows`` rows, in order; on
    threads where there is more than one slice and more than one core."""
    bounds = [(start, min(start + SLICE_ROWS, rows)) for start in range(0, rows, SLICE_ROWS)]
    workers = min(len(bounds), usable_cores())
    if workers <= 1:
        return [task(start, stop) for start, stop in bounds]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda bound: task(*bound), bounds))
