"""Trace actions as small integer codes.

Known actions have fixed codes so columns can be compared with constants; an action
this version has never seen gets the next free code and is kept, shown and counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from memtui.model.strings import terminal_safe, text_of

if TYPE_CHECKING:
    import numpy as np

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
ANNOTATE = 10  # newer torch (_annotate_memory): user_metadata labelling the block live at addr

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
    "annotate",
)

# Block lifetimes: which actions start, request the end of, and end an allocation.
BLOCK_START = (ALLOC,)
BLOCK_REQUEST = (FREE_REQUESTED,)
BLOCK_END = (FREE_COMPLETED, FREE)
BLOCK_ACTIONS = (ALLOC, FREE_REQUESTED, FREE_COMPLETED, FREE)
SEGMENT_START = (SEGMENT_ALLOC, SEGMENT_MAP)
SEGMENT_END = (SEGMENT_FREE, SEGMENT_UNMAP)
SEGMENT_ACTIONS = SEGMENT_START + SEGMENT_END

# The same, by name: what the scan's thread pairs by before the model exists (memtui/load/ahead.py).
BLOCK_ROLE_NAMES = tuple(tuple(KNOWN_ACTIONS[c] for c in codes) for codes in (BLOCK_START, BLOCK_REQUEST, BLOCK_END))

# Codes are int16; a file with more distinct action names than any allocator has is
# broken or hostile, and the names past this many share one code.
MAX_ACTION_NAMES = 4096
OTHER_ACTIONS = "(other actions)"


def one_of(action: np.ndarray, codes: Iterable[int]) -> np.ndarray:
    """Mask of the events whose code is among ``codes``: a comparison per code, where
    np.isin converts or sorts the whole column first (twice the time on a 10M-event trace's
    codes, and the time of a sort on codes that vary)."""
    import numpy as np  # here: the command line reads the names above before numpy is imported

    mask = np.zeros(action.shape, bool)
    for code in codes:
        mask |= action == code
    return mask


def any_of(action: np.ndarray, codes: Iterable[int]) -> bool:
    """Whether any event's code is among ``codes``, stopping at the first code found."""
    return any(bool((action == code).any()) for code in codes)


class ActionTable:
    """Names ↔ codes; starts with the known actions and grows with unknown ones."""

    def __init__(self, names: list[str] | None = None) -> None:
        self.names: list[str] = list(names) if names is not None else list(KNOWN_ACTIONS)
        self._codes = {name: code for code, name in enumerate(self.names)}

    def code(self, name: object) -> int:
        # Names are shown in the terminal: a control character in one must not reach it raw.
        key = terminal_safe(name) if isinstance(name, str) else "None" if name is None else text_of(name)
        code = self._codes.get(key)
        if code is None:
            if len(self.names) >= MAX_ACTION_NAMES - 1:
                key = OTHER_ACTIONS
                code = self._codes.get(key)
                if code is not None:
                    return code
            code = len(self.names)
            self.names.append(key)
            self._codes[key] = code
        return code

    def lookup(self, name: str) -> int | None:
        """The code of ``name`` if it occurs (or is known), else None."""
        return self._codes.get(name)

    def name(self, code: int) -> str:
        return self.names[code]
