"""Passes over whole columns that the model and its figures make: ids looked up in a table
with the bounds of what comes out, the bounds of a column, infinite times made no time, the
least and greatest time, the events per code, the rows of some codes.

Each is one compiled pass (src/memtui_native/columns.c) on the cores the process may use,
without the GIL. numpy made each of them several passes and temporaries, a slice at a time
on a pool of Python threads that took turns with the GIL: on the 16-core host the model's
columns of 10M events took 80 ms and the figures `info` prints 45 ms (docs/performance.md).
Where memtui was built without a C compiler (or ``MEMTUI_NO_NATIVE`` is set), numpy gives the
same answers, value for value; tests hold the two equal.
"""

from __future__ import annotations

import math
import os

import numpy as np

from memtui.compiled import native as _native
from memtui.cores import usable_cores
from memtui.model.actions import one_of
from memtui.model.slices import on_slices

# Tests turn the compiled passes off to compare them with numpy's.
use_native = _native is not None and not os.environ.get("MEMTUI_NO_NATIVE")

Bounds = tuple[int, int]


def _compiled_takes(*columns: np.ndarray, kind: str = "i") -> bool:
    """Whether the compiled passes take these columns: whole contiguous arrays of signed
    integers (``kind`` "i") or of float64 (``kind`` "f"); a strided view, or a column of
    another type, goes the numpy way."""
    return use_native and all(c.flags.c_contiguous and c.dtype.kind == kind and (kind == "i" or c.dtype.itemsize == 8)
                              for c in columns)


class OutsideTable(ValueError):
    """An id that no entry of the table has."""


def remap(ids: np.ndarray, table: np.ndarray, out: np.ndarray) -> Bounds | None:
    """``out[i] = table[ids[i]]`` (a negative id counts from the end, as Python's indexing does),
    and the least and greatest value written; None for no rows. ``out`` is of the table's
    type. Raises OutsideTable for an id no entry has (then ``out`` holds nothing useful)."""
    if _compiled_takes(ids, table, out):
        try:
            looked_up: Bounds | None = _native.remap(ids, table, out, usable_cores())
        except ValueError:
            raise OutsideTable("an id outside the table") from None
        return looked_up
    if not len(ids):
        return None
    if int(ids.min()) < -len(table) or int(ids.max()) >= len(table):
        raise OutsideTable("an id outside the table")
    # In bounds (checked above), so wrap reads what the default mode reads, without its
    # buffered copy of the output.
    np.take(table, ids, out=out, mode="wrap")
    return int(out.min()), int(out.max())


def bounds(column: np.ndarray) -> Bounds | None:
    """The least and greatest value of an integer column; None for no rows."""
    if _compiled_takes(column):
        span: Bounds | None = _native.remap(column, None, None, usable_cores())
        return span
    return (int(column.min()), int(column.max())) if len(column) else None


def finite_times(times: np.ndarray) -> None:
    """Each infinite time (float64, either sign) made NaN, which is no time, in place."""
    if _compiled_takes(times, kind="f"):
        _native.finite_times(times, usable_cores())
    else:
        times[np.isinf(times)] = np.nan


def time_span(times: np.ndarray) -> tuple[float, float]:
    """The least and greatest of the float64 ``times`` that are not NaN; NaN, NaN for none."""
    if _compiled_takes(times, kind="f"):
        compiled: tuple[float, float] = _native.time_span(times, usable_cores())
        return compiled
    # fmin and fmax skip NaN; a slice of none gives NaN
    parts = on_slices(len(times), lambda start, stop: (float(np.fmin.reduce(times[start:stop])),
                                                       float(np.fmax.reduce(times[start:stop]))))
    low = min((p[0] for p in parts if not math.isnan(p[0])), default=math.nan)
    high = max((p[1] for p in parts if not math.isnan(p[1])), default=math.nan)
    return low, high


def code_counts(codes: np.ndarray) -> np.ndarray:
    """The rows of each code 0..highest (int64), as numpy's bincount: codes are never
    negative (ValueError)."""
    if _compiled_takes(codes) and codes.dtype.itemsize <= 2:
        return np.frombuffer(_native.code_counts(codes, usable_cores()), np.int64)
    parts = on_slices(len(codes), lambda start, stop: np.bincount(codes[start:stop]))
    counts = np.zeros(max((len(part) for part in parts), default=0), np.int64)
    for part in parts:
        counts[:len(part)] += part
    return counts


def positions(codes: np.ndarray, wanted: tuple[int, ...]) -> np.ndarray:
    """The rows whose code is one of ``wanted``, ascending (int64)."""
    if _compiled_takes(codes) and codes.dtype.itemsize <= 2:
        return np.frombuffer(_native.positions(codes, wanted, usable_cores()), np.int64)
    parts = on_slices(len(codes), lambda start, stop: np.flatnonzero(one_of(codes[start:stop], set(wanted))) + start)
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, np.int64)
