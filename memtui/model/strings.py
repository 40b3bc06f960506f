"""Interning of repeated strings (filenames, function names, compile contexts...).

Strings come from files written elsewhere, so they are made safe for a terminal here,
once: control characters (an escape sequence hidden in a function name) and lone
surrogates are replaced by visible ``\\x1b``-style escapes. Everything above the model
can print any interned string without further care.
"""

from __future__ import annotations

import reprlib

# Non-string values (a broken file's list where a name should be) are shown through a
# bounded repr: a deeply nested or huge container must not recurse or grow without end.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 60


def text_of(value: object) -> str:
    """The text a field value stands for: strings as they are, None as '', anything else
    as a short repr. Never raises, whatever the value (huge ints, deep nesting)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return _SHORT_REPR.repr(value) if isinstance(value, (list, tuple, dict, set, frozenset)) else str(value)
    except ValueError:
        if isinstance(value, int):
            return hex(value)  # Python refuses decimal text for ints of over 4300 digits
        return f"<{type(value).__name__}>"
    except (RecursionError, TypeError):
        return f"<{type(value).__name__}>"


def terminal_safe(value: str) -> str:
    """``value`` with every non-printable character written as a visible escape."""
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in value)


def terminal_safe_value(value: object, depth: int = 8, budget: int = 10_000) -> object:
    """``value`` (settings, an export's header) with every string in it terminal-safe.

    Containers nested deeper than ``depth`` or past the first ``budget`` items (a pickle
    can share one list many times over, so a small file can describe a huge tree) become
    a short placeholder; integers too long to print in decimal become hex.
    """
    left = [budget]

    def safe(value: object, depth: int) -> object:
        left[0] -= 1
        if isinstance(value, str):
            return terminal_safe(value)
        if isinstance(value, int) and value.bit_length() > 128:
            return text_of(value)
        if not isinstance(value, (list, tuple, dict)):
            return value
        if depth <= 0 or left[0] < len(value):
            return f"<{type(value).__name__} of {len(value)}>"
        if isinstance(value, dict):
            return {safe(k, 0): safe(v, depth - 1) for k, v in value.items()}
        return type(value)(safe(v, depth - 1) for v in value)

    return safe(value, depth)


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
        self.dict_ids: set[int] = set()  # strings that stand for a dict (user_metadata given as one)
        for value in values or []:
            self.intern(value)

    def intern(self, value: object) -> int:
        if not isinstance(value, str):
            value = text_of(value)
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

    def raw(self, sid: int) -> str:
        """The string as the file had it, before control characters were escaped: what is
        written back (exports, ``convert``) and split into lines before showing."""
        raw: list[str] | None = self.__dict__.get("_raw")
        if raw is None or len(raw) != len(self.values):
            raw = [""] * len(self.values)
            for key, i in self._ids.items():
                raw[i] = key
            self.__dict__["_raw"] = raw
        return raw[sid]

    def __getitem__(self, sid: int) -> str:
        return self.values[sid]

    def __len__(self) -> int:
        return len(self.values)
