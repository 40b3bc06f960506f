"""File to rewritten opcode stream: decompress, strip the frames, find the first entry, rewrite.

The same steps run either in the loading process or, for large files, in a helper
process (producer.py) so they overlap with unpickling on a second core.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from memtui.load.source import ProgressFn, inspect_source, open_decompressed
from memtui.load.stream.errors import StreamFallback
from memtui.load.stream.header import find_first_entry
from memtui.load.stream.rewrite import Rewriter, rewritten_chunks
from memtui.load.stream.unframe import unframed_chunks

_HEADER_LIMIT = 256 << 20  # segments this large are unheard of; the plain path can have them


def rewritten_file(path: str | os.PathLike, sink_global: bytes, progress: ProgressFn | None) -> Iterator[bytes]:
    """The rewritten stream of ``path``; ``progress`` gets the bytes of the file consumed."""
    info = inspect_source(path)
    try:
        stream = open_decompressed(info, progress)
    except OSError as exc:
        raise StreamFallback(f"cannot open ({exc})") from None
    with stream:
        stream.check_opcodes()
        yield from rewritten_stream(unframed_chunks(stream), sink_global)


def rewritten_stream(chunks: Iterator[bytes], sink_global: bytes) -> Iterator[bytes]:
    buf = bytearray()
    want = 1 << 16
    first = None
    for chunk in chunks:
        buf += chunk
        if len(buf) >= want:
            first = find_first_entry(bytes(buf))
            if first is not None:
                break
            want = 2 * len(buf)
            if len(buf) > _HEADER_LIMIT:
                raise StreamFallback("no trace entry in the first 256 MiB")
    else:
        first = find_first_entry(bytes(buf))
        if first is None:
            raise StreamFallback("the pickle ends inside its first trace entry")
    yield bytes(buf[:first.list_pos]) + sink_global + bytes(buf[first.list_pos + 1:first.end])
    yield from rewritten_chunks(Rewriter(first, sink_global), bytes(buf[first.end:]), chunks)
