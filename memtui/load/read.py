"""A snapshot file read whole into a plain, normalized dict: safe unpickling, decompression,
format normalization.

``read_snapshot`` is the single entry point. It never executes code from the file and
every failure is a :class:`memtui.errors.SnapshotError` with a one-line message. The
format is told by content (:func:`content_kind`), never by the file's name.
"""


from __future__ import annotations

import os

from memtui.errors import SnapshotError
from memtui.load.changes import check_unchanged, file_state
from memtui.load.json_snapshot import load_json, looks_like_json
from memtui.load.msgpack_export import looks_like_export, read_export
from memtui.load.normalize import normalize
from memtui.load.safe_pickle import safe_load
from memtui.load.shape import check_start
from memtui.load.source import ProgressFn, decompression_errors, inspect_source, open_decompressed

_HEAD = 1 << 16  # enough to see past a JSON file's leading whitespace


def read_snapshot(path: str | os.PathLike, progress: ProgressFn | None = None) -> dict:
    """Read ``path`` (pickle, JSON or memtui msgpack export, each possibly compressed) into
    a normalized dict."""
    info = inspect_source(path)
    check_start(info)  # a file that is no snapshot is refused before anything big is built
    before = file_state(info.path)
    description = os.path.basename(info.path)
    try:
        stream = open_decompressed(info, progress)
    except OSError as exc:
        raise SnapshotError(f"{info.path}: cannot open ({exc.strerror or exc})") from None
    with stream:
        try:
            head = stream.peek(_HEAD)[:_HEAD]
        except decompression_errors() as exc:
            kind = f"{info.compression} " if info.compression else ""
            raise SnapshotError(f"{description}: corrupt {kind}data ({exc})") from None
        kind = content_kind(head)
        if kind == "export":
            obj = read_export(stream, description)
        else:
            if kind is None:
                raise SnapshotError(f"{description}: not a PyTorch memory snapshot (not a pickle or JSON)")
            try:
                obj = load_json(stream, description) if kind == "json" else safe_load(stream, description)
            except SnapshotError:
                raise
            except decompression_errors() as exc:
                raise SnapshotError(f"{description}: truncated or corrupt {info.compression} data ({exc})") from None
            except Exception as exc:  # zstandard.ZstdError and friends
                raise SnapshotError(f"{description}: corrupt compressed data ({type(exc).__name__})") from None
    check_unchanged(info.path, before, description)
    return normalize(obj, description)


def content_kind(head: bytes) -> str | None:
    """'export', 'json' or 'pickle' from the first decompressed bytes; None for neither.

    A memtui export starts with a msgpack map byte (0x80-0x8f, 0xde), JSON with ``{`` or
    ``[`` after whitespace, a pickle with PROTO or an opcode: no two overlap, the export
    test (whose first byte is also PROTO's) comes first.
    """
    if looks_like_export(head):
        return "export"
    if looks_like_json(head):
        return "json"
    if _looks_like_pickle(head):
        return "pickle"
    return None


def _looks_like_pickle(head: bytes) -> bool:
    # Protocol 2+ starts with PROTO; protocols 0 and 1 start with a container opcode.
    if head[:1] == b"\x80":
        return len(head) > 1 and 2 <= head[1] <= 5
    # GLOBAL ('c') and INST ('i') are allowed through so a hostile protocol-0 file is
    # refused by the name of the global it asks for, which is the clearer message.
    return head[:1] in (b"(", b"]", b"}", b"l", b"d", b"N", b"I", b"L", b"S", b"V", b"X", b"K", b"J", b"M",
                        b"F", b"c", b"i")
