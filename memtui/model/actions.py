"""Trace actions as small integer codes.

Known actions have fixed codes so columns can be compared with constants; an action
this version has never seen gets the next free code and is kept, shown and counted.
"""

from __future__ import annotations

ALLOC = 0
FREE_REQUESTED = 1
FREE_COMPLETED = 2
SEGMENT_ALLOC = 3
SEGMENT_FREE = 4
SEGMENT_MAP = 5
SEGMENT_UNMAP = 6
OOM = 7
SNAPSHOT = 8
FREE = 9  # older torch: a single free event, no request/completion split

KNOWN_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
    "free",
)

# Block lifetimes: which actions start, request the end of, and end an allocation.
BLOCK_START = (ALLOC,)
BLOCK_END = (FREE_COMPLETED, FREE)
BLOCK_ACTIONS = (ALLOC, FREE_REQUESTED, FREE_COMPLETED, FREE)
SEGMENT_START = (SEGMENT_ALLOC, SEGMENT_MAP)
SEGMENT_END = (SEGMENT_FREE, SEGMENT_UNMAP)
SEGMENT_ACTIONS = SEGMENT_START + SEGMENT_END


class ActionTable:
    """Names ↔ codes; starts with the known actions and grows with unknown ones."""

    def __init__(self, names: list[str] | None = None) -> None:
        self.names: list[str] = list(names) if names is not None else list(KNOWN_ACTIONS)
        self._codes = {name: code for code, name in enumerate(self.names)}

    def code(self, name: object) -> int:
        key = name if isinstance(name, str) else repr(name)
        code = self._codes.get(key)
        if code is None:
            code = len(self.names)
            self.names.append(key)
            self._codes[key] = code
        return code

    def lookup(self, name: str) -> int | None:
        """The code of ``name`` if it occurs (or is known), else None."""
        return self._codes.get(name)

    def name(self, code: int) -> str:
        return self.names[code]
