"""Parsing and formatting of address_n identifiers (``7f064c000000_0``).

memory_viz prints blocks as ``b7f064c000000_0`` and segments as ``s7f064c000000_0``.
``b`` is also a hex digit, so a prefixed form is ambiguous on its face; parsing returns
every reading, prefix-stripped first, and the model keeps the one that exists.
"""

from __future__ import annotations

import re

_ADDRESS_N = re.compile(r"^\s*(0x)?([0-9a-fA-F]+|s[0-9a-fA-F]+)(?:_(\d+))?\s*$")


def format_address_n(addr: int, version: int) -> str:
    return f"{int(addr):x}_{int(version)}"


def parse_address_candidates(text: str) -> list[tuple[int, int | None]]:
    """Readings of ``text`` as (address, n); n is None for a bare address.

    ``7f06_0``, ``0x7f06_0``, ``b7f06_0``, ``s7f06_0`` and bare ``7f06``/``0x7f06`` all parse.
    """
    m = _ADDRESS_N.match(text)
    if not m:
        # 0x after a prefix letter: b0x7f.., s0x7f..
        m2 = re.match(r"^\s*[bs]0x([0-9a-fA-F]+)(?:_(\d+))?\s*$", text)
        if not m2:
            return []
        n = int(m2.group(2)) if m2.group(2) is not None else None
        return [(int(m2.group(1), 16), n)]
    digits = m.group(2)
    n = int(m.group(3)) if m.group(3) is not None else None
    readings: list[tuple[int, int | None]] = []
    if m.group(1) is None and digits[0] in "bBsS" and len(digits) > 1:
        readings.append((int(digits[1:], 16), n))
    if digits[0] not in "sS":
        readings.append((int(digits, 16), n))
    return readings
