"""File → plain snapshot dict: safe unpickling, decompression, format normalization.

``read_snapshot`` is the single entry point. It never executes code from the file and
every failure is a :class:`memtui.errors.SnapshotError` with a one-line message.
"""

from __future__ import annotations

import os

from memtui.errors import SnapshotError
from memtui.load.changes import check_unchanged, file_state
from memtui.load.normalize import normalize
from memtui.load.safe_pickle import safe_load
from memtui.load.source import DECOMPRESSION_ERRORS, ProgressFn, SourceInfo, inspect_source, open_decompressed

__all__ = ["read_snapshot", "inspect_source", "SourceInfo", "ProgressFn"]


def read_snapshot(path: str | os.PathLike, progress: ProgressFn | None = None) -> dict:
    """Read ``path`` (pickle, compressed pickle or memtui msgpack export) into a normalized dict."""
    info = inspect_source(path)
    before = file_state(info.path)
    description = os.path.basename(info.path)
    try:
        stream = open_decompressed(info, progress)
    except OSError as exc:
        raise SnapshotError(f"{info.path}: cannot open ({exc.strerror or exc})") from None
    with stream:
        try:
            head = stream.peek(32)[:32]
        except DECOMPRESSION_ERRORS as exc:
            kind = f"{info.compression} " if info.compression else ""
            raise SnapshotError(f"{description}: corrupt {kind}data ({exc})") from None
        if _looks_like_export(head):
            from memtui.export.reader import read_export

            obj = read_export(stream, description)
        else:
            if not _looks_like_pickle(head):
                raise SnapshotError(f"{description}: not a PyTorch memory snapshot (not a pickle)")
            try:
                obj = safe_load(stream, description)
            except SnapshotError:
                raise
            except DECOMPRESSION_ERRORS as exc:
                raise SnapshotError(f"{description}: truncated or corrupt {info.compression} data ({exc})") from None
            except Exception as exc:  # zstandard.ZstdError and friends
                raise SnapshotError(f"{description}: corrupt compressed data ({type(exc).__name__})") from None
    check_unchanged(info.path, before, description)
    return normalize(obj, description)


def _looks_like_pickle(head: bytes) -> bool:
    # Protocol 2+ starts with PROTO; protocols 0 and 1 start with a container opcode.
    if head[:1] == b"\x80":
        return len(head) > 1 and 2 <= head[1] <= 5
    # GLOBAL ('c') and INST ('i') are allowed through so a hostile protocol-0 file is
    # refused by the name of the global it asks for, which is the clearer message.
    return head[:1] in (b"(", b"]", b"}", b"l", b"d", b"N", b"I", b"L", b"S", b"V", b"X", b"K", b"J", b"M",
                        b"F", b"c", b"i")


def _looks_like_export(head: bytes) -> bool:
    from memtui.export.format import looks_like_export

    return looks_like_export(head)
