"""Turning Python lists of values into numpy columns, tolerating odd values.

Integers stay exact: addresses past 63 bits fall back to uint64, and past 64 bits (up to
128) to an object column, never wrapped. A value of the wrong type becomes a neutral default and
is reported through ``warnings`` so ``memtui check`` can list it.

Columns of ids and small numbers are stored as narrow as their values allow
(:func:`narrowest`): a ten-million-event trace's stack ids, string ids, action codes and
streams then cost a byte or two a row instead of eight.
"""

from __future__ import annotations

import math

import numpy as np


def int_column(values: list[object], field: str, warnings: list[str], default: int = 0,
               wide: bool = False) -> np.ndarray:
    """int64 column; bad values become ``default`` (reported in ``warnings``).

    With ``wide`` (addresses) values past 63 bits stay exact in a uint64 or, past 64
    bits, an object column. Without it (sizes, streams) they are out of range and
    replaced like any other bad value.
    """
    if not values:
        return np.zeros(0, np.int64)
    try:
        return _one_dimensional(np.array(values, dtype=np.int64))
    except (OverflowError, TypeError, ValueError):
        pass
    values = _sanitize_ints(values, field, warnings, default, wide)
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        pass
    try:
        return np.array(values, dtype=np.uint64)
    except OverflowError:
        return np.array(values, dtype=object)


def float_column(values: list[object], field: str, warnings: list[str]) -> np.ndarray:
    """float64 column; None and unreadable values become NaN."""
    try:
        return _one_dimensional(np.array(values, dtype=np.float64)) if values else np.zeros(0, np.float64)
    except (TypeError, ValueError, OverflowError):
        out = np.full(len(values), np.nan)
        bad = 0
        for i, v in enumerate(values):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                try:
                    out[i] = float(v)
                except OverflowError:
                    bad += 1
            elif v is not None:
                bad += 1
        if bad:
            warnings.append(f"{bad} entries have a non-numeric '{field}' (treated as missing)")
        return out


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
WIDEST = 1 << 128  # wide values are kept exact up to here; past it they are not addresses but noise


def _one_dimensional(array: np.ndarray) -> np.ndarray:
    # numpy turns values that are all lists of one length into a 2-D array without complaint.
    if array.ndim != 1:
        raise TypeError("not one number per value")
    return array


def _sanitize_ints(values: list[object], field: str, warnings: list[str], default: int, wide: bool) -> list[object]:
    bad = 0
    out: list[object] = []
    for v in values:
        if isinstance(v, float) and math.isfinite(v) and abs(v) < 2**63:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or (not wide and not INT64_MIN <= v <= INT64_MAX) or (
                wide and not INT64_MIN <= v < WIDEST):
            out.append(default)
            bad += 1
        else:
            out.append(v)
    if bad:
        warnings.append(f"1 value of '{field}' is not a usable integer (treated as {default})" if bad == 1 else
                        f"{bad:,} values of '{field}' are not usable integers (treated as {default})")
    return out


def sort_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes that sort like ``values`` (identity for numeric columns)."""
    if values.dtype != object:
        return values
    if len(values) == 0:
        return np.zeros(0, np.int64)
    _, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64)


_NARROW = (np.int8, np.int16, np.int32)


def narrowest(values: np.ndarray) -> np.ndarray:
    """``values`` (signed integers) in the narrowest of int8, int16, int32 and int64 that holds
    them with one to spare each way, so ``x + 1`` and ``x - 1`` never wrap. Anything wider
    than one step (``x * 2``, ``np.where(m, len(trace), x)``) must widen first:
    ``x.astype(np.int64)``. Unsigned and object columns are returned as they are."""
    if values.dtype.kind != "i":
        return values
    if not len(values):
        return values.astype(np.int8)
    return values.astype(narrow_type(int(values.min()), int(values.max())), copy=False)


def narrow_type(lo: int, hi: int) -> type[np.signedinteger]:
    """The type :func:`narrowest` gives values from ``lo`` to ``hi`` (for callers that know
    the bounds without a pass over the values)."""
    for dtype in _NARROW:
        info = np.iinfo(dtype)
        if info.min < lo and hi < info.max:
            return dtype
    return np.int64
