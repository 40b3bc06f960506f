"""Plain JSON values from whatever a snapshot holds (tuples, odd keys, NaN, unknown types)."""

from __future__ import annotations

import math


def json_value(value: object) -> object:
    """``value`` as JSON can carry it: tuples become lists, keys strings, NaN/inf null,
    anything else its ``str``."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
