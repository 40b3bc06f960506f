"""Noticing that a file changed while it was read.

A snapshot is often opened while the process that dumps it is still writing it, or
replaces it. What was read then mixes two versions (or stops short), and a model built
from it would be cached under the new file's name. The file's identity, size and
modification time are taken before reading and compared after: any difference refuses
the result with one line, and opening the file again once it is complete works.
"""

from __future__ import annotations

import os

from memtui.errors import SnapshotError

FileState = tuple[int, int, int, int]


def file_state(path: str | os.PathLike) -> FileState | None:
    """What identifies ``path``'s content cheaply; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return state_of(st)


def state_of(st: os.stat_result) -> FileState:
    """:func:`file_state` of a file already looked at (``os.stat``, or ``os.fstat`` of one opened)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def check_unchanged(path: str | os.PathLike, before: FileState | None, description: str) -> None:
    """Raise SnapshotError when ``path`` is no longer what ``before`` described."""
    after = file_state(path)
    if after == before:
        return
    if after is None:
        raise SnapshotError(f"{description}: the file disappeared while it was being read")
    if before is not None and after[:2] == before[:2] and after[2] != before[2]:
        change = f"its size went from {before[2]:,} to {after[2]:,} bytes"
    else:
        change = "it was modified or replaced"
    raise SnapshotError(f"{description}: the file changed while it was being read ({change}); open it again once "
                        "whatever writes it has finished")
