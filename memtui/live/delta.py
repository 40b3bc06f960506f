"""What is new in a trace since the last look: the incremental part of the live protocol.

torch hands out the whole ring buffer at every ``_snapshot()``. The entries themselves carry
no sequence number, so the cursor remembers the last few entries it saw (time, action,
address, size) and finds them again in the next copy; whatever follows is new. If they
are gone, the ring buffer wrapped past them between two looks: every entry is new, and the
gap is said.
"""

from __future__ import annotations

from collections.abc import Sequence

# How many trailing entries identify a position. Entries of one microsecond can repeat
# (a free_requested and its free_completed), so one entry alone is not enough.
TAIL = 4


def entry_key(entry: dict) -> tuple:
    return (entry.get("time_us"), entry.get("action"), entry.get("addr"), entry.get("size"),
            entry.get("stage"), entry.get("name"))


class Cursor:
    """The position reached in each of several growing (or wrapping) lists."""

    def __init__(self) -> None:
        self._tails: dict[object, list[tuple]] = {}
        self._lengths: dict[object, int] = {}

    def new_items(self, key: object, items: Sequence[dict]) -> tuple[list[dict], bool]:
        """The items of ``items`` after the position remembered under ``key`` and whether a
        gap lies before them (the list wrapped past that position); moves the position."""
        tail = self._tails.get(key)
        start, gap = 0, False
        if tail:
            found = _at_length(items, tail, self._lengths.get(key, 0))
            if found is None:
                found = _find_tail(items, tail)
            if found is None:
                gap = True
            else:
                start = found
        if items:
            self._tails[key] = [entry_key(e) for e in items[-TAIL:]]
            self._lengths[key] = len(items)
        return list(items[start:]), gap

    def reset(self) -> None:
        self._tails.clear()
        self._lengths.clear()


def _at_length(items: Sequence[dict], tail: list[tuple], length: int) -> int | None:
    """``length`` if the list only grew since it had that many items (no wrap): the common
    case, and the one where entries repeated within a microsecond cannot mislead."""
    if length < len(tail) or len(items) < length:
        return None
    if all(entry_key(items[length - len(tail) + i]) == key for i, key in enumerate(tail)):
        return length
    return None


def _find_tail(items: Sequence[dict], tail: list[tuple]) -> int | None:
    """The index just after the last place where ``tail`` occurs in ``items``, or None."""
    last = tail[-1]
    for i in range(len(items) - 1, -1, -1):
        if entry_key(items[i]) != last:
            continue
        ok = True
        for back in range(1, len(tail)):
            j = i - back
            if j < 0:
                break  # the list starts inside the remembered tail: what is there matches
            if entry_key(items[j]) != tail[-1 - back]:
                ok = False
                break
        if ok:
            return i + 1
    return None
