"""Parsing the value part of ``field:value`` terms into what the evaluator needs.

Everything that can be wrong with a value is found here, when the filter is compiled,
so evaluating a compiled filter against a snapshot never fails on syntax.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memtui.model.address_n import parse_address
from memtui.query.nodes import FilterError
from memtui.units import parse_size

COMPARISONS = ("<=", ">=", "=", "<", ">")


@dataclass(frozen=True)
class Range:
    """``lo <= x <= hi`` with either bound optional and either end possibly exclusive."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # True: lo < x
    hi_open: bool = False  # True: x < hi


@dataclass(frozen=True)
class AddressValue:
    """Readings of an address or address_n; ``segment_hint`` when typed with an ``s`` prefix."""

    candidates: tuple[tuple[int, int | None], ...]
    segment_hint: bool

    @property
    def has_version(self) -> bool:
        return self.candidates[0][1] is not None


@dataclass(frozen=True)
class PoolValue:
    """``pool:`` by torch's id (a prefix of ``segment_pool_id``) or by kind and number."""

    prefix: tuple[int, ...] = ()
    kind: str | None = None  # default, private (any but the default), graph, mempool
    number: int | None = None  # graph pool N / mempool N


POOL_KINDS = ("default", "private", "graph", "mempool")
_POOL_NAME = re.compile(r"^(default|private|graph|mempool)(\d*)$")


def pool_value(text: str, position: int, what: str) -> PoolValue:
    m = _POOL_NAME.match(text.strip().lower())
    if m:
        return PoolValue(kind=m.group(1), number=int(m.group(2)) if m.group(2) else None)
    return PoolValue(prefix=int_list(text, position, what))


@dataclass(frozen=True)
class FileValue:
    text: str  # lower-cased substring of the filename
    line: int | None


_TIME = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(us|µs|ms|s|min)?$", re.IGNORECASE)
_TIME_FACTORS = {None: 1e6, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, "min": 60e6}
_FILE_LINE = re.compile(r"^(.*):(\d+)$")


def parse_range(text: str, op: str, position: int, parse_one: Callable[[str], float | None], what: str) -> Range:
    """``op`` is ':' (a value or ``A..B`` range, inclusive) or a comparison."""
    if op != ":":
        bound = _one(text, position, parse_one, what)
        return {
            "=": Range(bound, bound),
            "<": Range(hi=bound, hi_open=True),
            "<=": Range(hi=bound),
            ">": Range(lo=bound, lo_open=True),
            ">=": Range(lo=bound),
        }[op]
    if ".." not in text:
        bound = _one(text, position, parse_one, what)
        return Range(bound, bound)
    left, right = text.split("..", 1)
    if not left and not right:
        raise FilterError(f"a range needs at least one bound ({what})", position, expected=what)
    lo = _one(left, position, parse_one, what) if left else None
    hi = _one(right, position + len(left) + 2, parse_one, what) if right else None
    if lo is not None and hi is not None and lo > hi:
        raise FilterError(f"range {text!r} is empty (its start is after its end)", position, expected=what)
    return Range(lo, hi)


def _one(text: str, position: int, parse_one: Callable[[str], float | None], what: str) -> float:
    value = parse_one(text)
    if value is None:
        shown = repr(text) if text else "nothing"
        raise FilterError(f"expected {what}, got {shown}", position, expected=what)
    return value


def size_value(text: str) -> int | None:
    return parse_size(text) if text and not text.lstrip().startswith("-") else None


def time_value(text: str) -> float | None:
    """Microseconds from ``1.5s``, ``200ms``, ``30us``, ``2min``; a bare number is seconds."""
    m = _TIME.match(text)
    if not m:
        return None
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _TIME_FACTORS[unit]


def index_value(text: str) -> int | None:
    try:
        return int(text, 10) if text and text[0].isdigit() else None
    except ValueError:
        return None


def int_value(text: str) -> int | None:
    """A decimal or 0x-hex integer (stream ids are often printed in hex)."""
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        return None


def int_list(text: str, position: int, what: str) -> tuple[int, ...]:
    values = []
    offset = position
    for part in text.split(","):
        value = int_value(part.strip())
        if value is None:
            shown = repr(part) if part else "nothing"
            raise FilterError(f"expected {what}, got {shown}", offset, expected=what)
        values.append(value)
        offset += len(part) + 1
    return tuple(values)


def name_list(text: str, position: int, what: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in text.split(","))
    if not all(names):
        raise FilterError(f"expected {what}, got {text!r}" if text else f"expected {what}", position, expected=what)
    return names


def address_value(text: str, position: int, what: str) -> AddressValue:
    query = parse_address(text) if text else None
    if query is None:
        shown = repr(text) if text else "nothing"
        raise FilterError(f"expected {what}, got {shown}", position, expected=what)
    return AddressValue(query.readings, query.segment)


def file_value(text: str) -> FileValue:
    m = _FILE_LINE.match(text)
    if m and m.group(1):
        return FileValue(m.group(1).lower(), int(m.group(2)))
    return FileValue(text.lower(), None)


def looks_like_address_n(text: str) -> bool:
    """A bare word that names one allocation (``7f06..._3``, ``b7f06..._0``, ``b'7f06..._0``)."""
    query = parse_address(text)
    return query is not None and query.versioned


def looks_like_hex_address(text: str) -> bool:
    """A bare word that is unmistakably an address without a version (``0x7f06...``)."""
    query = parse_address(text)
    return query is not None and not query.versioned and text.strip().lower().lstrip("bs'").startswith("0x")
