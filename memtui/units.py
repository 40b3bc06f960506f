"""Human-readable sizes and times, and parsing sizes typed by users."""

from __future__ import annotations

import math
import re

_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]

_SIZE_FACTORS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
    "t": 1000**4, "tb": 1000**4, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def format_bytes(n: int | float) -> str:
    """``1.17 GiB`` style; exact bytes below 1 KiB; negative sizes keep their sign."""
    if n is None or (isinstance(n, float) and not math.isfinite(n)):
        return "?"
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    if value < 1024:
        return f"{sign}{int(value)} B"
    for unit in _UNITS[1:]:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{sign}{value:.2f} {unit}"
    raise AssertionError


def parse_size(text: str) -> int | None:
    """Bytes from ``1MiB``, ``1.5 GB``, ``512``; None when it is not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    factor = _SIZE_FACTORS.get(m.group(2).lower())
    if factor is None:
        return None
    return int(float(m.group(1)) * factor)


def format_seconds(seconds: float) -> str:
    """Relative time for event rows: ``12.345678s``; '?' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    return f"{seconds:.6f}s"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``1 segment``, ``3 segments``, ``1,024 events``: a count with its noun agreeing.

    ``plural_form`` is for nouns that do not just take an ``s`` (``1 match``, ``2 matches``).
    """
    word = noun if n == 1 else (plural_form or noun + "s")
    return f"{n:,} {word}"
