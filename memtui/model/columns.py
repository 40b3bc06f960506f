"""Turning Python lists of values into numpy columns, tolerating odd values.

Integers stay exact: addresses past 63 bits fall back to uint64, and past 64 bits to an
object column, never wrapped. A value of the wrong type becomes a neutral default and
is reported through ``warnings`` so ``memtui check`` can list it.
"""

from __future__ import annotations

import math

import numpy as np


def int_column(values: list, field: str, warnings: list[str], default: int = 0) -> np.ndarray:
    """int64 column (uint64 or object when values do not fit); bad values become ``default``."""
    try:
        return np.array(values, dtype=np.int64) if values else np.zeros(0, np.int64)
    except OverflowError:
        pass
    except (TypeError, ValueError):
        values = _sanitize_ints(values, field, warnings, default)
        return int_column(values, field, warnings, default)
    try:
        return np.array(values, dtype=np.uint64)
    except (OverflowError, ValueError, TypeError):
        return np.array(values, dtype=object)


def float_column(values: list, field: str, warnings: list[str]) -> np.ndarray:
    """float64 column; None and unreadable values become NaN."""
    try:
        return np.array(values, dtype=np.float64) if values else np.zeros(0, np.float64)
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


def _sanitize_ints(values: list, field: str, warnings: list[str], default: int) -> list:
    bad = 0
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            out.append(default)
            bad += 1
        elif isinstance(v, float):
            if math.isfinite(v):
                out.append(int(v))
            else:
                out.append(default)
                bad += 1
        else:
            out.append(v)
    if bad:
        warnings.append(f"{bad} values of '{field}' are not integers (treated as {default})")
    return out


def sort_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes that sort like ``values`` (identity for numeric columns)."""
    if values.dtype != object:
        return values
    if len(values) == 0:
        return np.zeros(0, np.int64)
    _, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64)
