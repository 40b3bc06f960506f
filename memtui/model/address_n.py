"""Parsing and formatting of address_n identifiers (``7f064c000000_0``).

The one parser for every place a user names an allocation (``/`` in the explorer,
``memtui stack``, filters). It accepts, in any case and with surrounding whitespace or
one pair of surrounding quotes:

* ``7f064c000000_0`` and ``0x7f064c000000_0``; a bare address (``7f064c000000``) names
  every allocation made at it;
* memory_viz's block and segment prefixes: ``b7f064c000000_0``, ``s7f064c000000_0``, and
  the spelling of today's MemoryViz, ``b'7f064c000000_0`` / ``s'7f064c000000_0`` (with or
  without a closing ``'``); ``0x`` may follow the prefix (``b0x7f...``, ``b'0x7f...``).

``b`` is also a hex digit, so ``b7f06_0`` is ambiguous on its face: parsing returns every
reading, prefix-stripped first, and the model keeps the one that exists. ``b'`` and
``b0x`` are not ambiguous, and ``s`` is never a digit: an ``s`` prefix names a segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FORM = re.compile(
    r"""^(?:(?P<prefix>[bs])(?P<tick>')?)?   # memory_viz's block/segment prefix, b' in newer versions
        (?P<hex>0x)?
        (?P<digits>[0-9a-f]+)
        (?:_(?P<n>\d+))?
        (?P<close>')?$""",
    re.IGNORECASE | re.VERBOSE,
)
_QUOTES = "'\"`"


@dataclass(frozen=True)
class AddressQuery:
    """What a user's text names: readings as (address, n), n None for a bare address."""

    readings: tuple[tuple[int, int | None], ...]
    segment: bool  # spelled with the s prefix
    explicit: bool  # unmistakably an address (a version, 0x, b' or s', 8+ hex digits), never frame text

    @property
    def versioned(self) -> bool:
        """An address_n (one life) rather than a bare address (all of them)."""
        return self.readings[0][1] is not None


def format_address_n(addr: int, version: int) -> str:
    return f"{int(addr):x}_{int(version)}"


def parse_address(text: str) -> AddressQuery | None:
    """``text`` as an address_n or address (see the module docstring), or None."""
    s = text.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in _QUOTES:
        s = s[1:-1].strip()
    m = _FORM.match(s)
    if m is None or (m.group("close") and not m.group("tick")):
        return None
    prefix, digits = (m.group("prefix") or "").lower(), m.group("digits")
    n = int(m.group("n")) if m.group("n") is not None else None
    readings = [(int(digits, 16), n)]
    if prefix == "b" and not m.group("tick") and not m.group("hex"):
        readings.append((int(prefix + digits, 16), n))  # b7f06..: the b may be the first digit
    explicit = bool(n is not None or m.group("hex") or m.group("tick") or len(prefix + digits) >= 8)
    return AddressQuery(tuple(readings), prefix == "s", explicit)


def parse_address_candidates(text: str) -> list[tuple[int, int | None]]:
    """Readings of ``text`` as (address, n); n is None for a bare address. Empty when
    ``text`` is not an address."""
    query = parse_address(text)
    return list(query.readings) if query is not None else []


def names_segment(text: str) -> bool:
    """Whether ``text`` is an address spelled with the segment prefix (``s7f..``, ``s'7f..``)."""
    query = parse_address(text)
    return query is not None and query.segment
