"""Interning of repeated strings (filenames, function names, compile contexts...).

Strings come from files written elsewhere, so they are made safe for a terminal here,
once: control characters (an escape sequence hidden in a function name) and lone
surrogates are replaced by visible ``\\x1b``-style escapes. Everything above the model
can print any interned string without further care.
"""

from __future__ import annotations


def terminal_safe(value: str) -> str:
    """``value`` with every non-printable character written as a visible escape."""
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in value)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class StringTable:
    """Assigns each distinct string a small integer id, in order of first appearance."""

    def __init__(self, values: list[str] | None = None) -> None:
        self.values: list[str] = []
        self._ids: dict[str, int] = {}
        self.escaped = 0  # how many distinct strings needed escaping (for `memtui check`)
        for value in values or []:
            self.intern(value)

    def intern(self, value: object) -> int:
        if not isinstance(value, str):
            value = "" if value is None else str(value)
        found = self._ids.get(value)
        if found is None:
            safe = terminal_safe(value)
            if safe is not value:
                self.escaped += 1
            found = len(self.values)
            self.values.append(safe)
            self._ids[value] = found
        return found

    def find(self, value: str) -> int | None:
        return self._ids.get(value)

    def __getitem__(self, sid: int) -> str:
        return self.values[sid]

    def __len__(self) -> int:
        return len(self.values)
