"""Protocol 4/5 framing: hop from FRAME header to FRAME header and yield the payloads.

The pickler cuts its output into FRAME opcodes (about 64 KiB each) whose 8-byte lengths
chain exactly from offset 2, so the frames can be stripped without looking inside them.
The payloads concatenated are an ordinary unframed opcode stream, which the rewriter
can then change in length. The only data a pickler writes outside a frame are a tail
too short to frame (the final STOP) and very large bytes or strings, whose opcode says
how long they are; anything else means the lengths lie, and the caller falls back.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

from memtui.load.stream.errors import StreamFallback

FRAME = 0x95
_LARGE = {  # opcodes a pickler writes unframed, with the size of their length field
    0x8D: 8,  # BINUNICODE8
    0x8E: 8,  # BINBYTES8
    0x96: 8,  # BYTEARRAY8
    ord("X"): 4,  # BINUNICODE
    ord("B"): 4,  # BINBYTES
}
_MAX_FRAME = 1 << 31  # real frames are ~64 KiB; a huge length is a lie, not a frame


def unframed_chunks(stream: BinaryIO) -> Iterator[bytes]:
    """The frame payloads of a protocol 4/5 pickle (after its PROTO opcode), in order."""
    head = _read_exact(stream, 2, allow_short=True)
    if len(head) < 2 or head[0] != 0x80 or head[1] not in (4, 5):
        raise StreamFallback("not a protocol 4 or 5 pickle")
    yield head
    while True:
        opcode = stream.read(1)
        if not opcode:
            return
        op = opcode[0]
        if op == FRAME:
            (length,) = struct.unpack("<Q", _read_exact(stream, 8))
            if length > _MAX_FRAME:
                raise StreamFallback(f"a frame claims {length} bytes")
            yield _read_exact(stream, length)
        elif op in _LARGE:
            width = _LARGE[op]
            raw = _read_exact(stream, width)
            length = int.from_bytes(raw, "little")
            yield opcode + raw + _read_exact(stream, length)
        else:
            rest = opcode + stream.read(8)
            if len(rest) > 4:
                raise StreamFallback("data outside a frame where the next frame should start")
            yield rest  # the unframed tail (STOP)
            return


def _read_exact(stream: BinaryIO, n: int, allow_short: bool = False) -> bytes:
    data = stream.read(n)
    if len(data) != n and not allow_short:
        raise StreamFallback("a frame runs past the end of the file")
    return data
