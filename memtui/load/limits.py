"""Bounds on what a file can make the loader allocate: declared lengths, long lines, bombs.

A pickle states the length of a string or bytes object before its content, and the
unpickler asks the file for that many bytes (or allocates them) before reading one: a
20-byte file that declares a 1 TiB string would otherwise be a memory bomb. Every read
the unpickler (or the streaming decoder) makes goes through :class:`GuardedStream`, which
refuses a request larger than what the file can still hold, in one line:

* an uncompressed file holds exactly what remains of it, so a declared length past that
  is a lie (or a truncated file) whatever its size;
* a compressed file's remaining content is unknown until it is inflated, so one object
  may claim at most ``MAX_COMPRESSED_ITEM`` and the whole stream may inflate at most
  ``MAX_INFLATION`` times the file (a compression bomb is refused, not swallowed).

Bytes objects are the exception: the C unpickler allocates them before it reads. A
failed allocation (MemoryError) is explained afterwards by :func:`memory_error_message`,
which walks the opcodes at the start of the file to find the declared length that caused it.
"""

from __future__ import annotations

import os
import pickletools
from typing import TYPE_CHECKING, BinaryIO

from memtui.errors import SnapshotError
from memtui.units import format_bytes

if TYPE_CHECKING:
    from memtui.load.source import SourceInfo

MAX_COMPRESSED_ITEM = 256 << 20  # no string in a memory snapshot comes near this
MAX_INFLATION = 1000  # real snapshots inflate ~25x; xz and zstd bombs reach 10,000x and more
INFLATION_FLOOR = 1 << 30  # small files may inflate this much whatever their ratio
_SLACK = 1 << 20  # reads a little past the end are ordinary (a truncated file's last frame)
_CHUNK = 64 << 20  # large reads are made in pieces, so memory grows with the data, not the claim
_DIAGNOSE_LIMIT = 4 << 20  # memory errors past this far into a file are taken as real


class GuardedStream:
    """A binary stream over ``info``'s decompressed content that refuses reads larger than
    the file can satisfy (see the module docstring)."""

    def __init__(self, stream: BinaryIO, info: SourceInfo) -> None:
        self._stream = stream
        self.info = info
        self._description = os.path.basename(info.path)
        self._size = info.size if info.compression is None else None
        self._inflation_limit = None if self._size is not None else max(INFLATION_FLOOR, MAX_INFLATION * info.size)
        self.consumed = 0  # bytes handed out so far

    def _check_request(self, n: int) -> None:
        if self._size is not None:
            left = self._size - self.consumed
            if n > left + _SLACK:
                raise SnapshotError(declared_too_long(self._description, n, left))
        elif n > MAX_COMPRESSED_ITEM:
            raise SnapshotError(declared_too_long(self._description, n, None))

    def _count(self, n: int) -> None:
        self.consumed += n
        if self._inflation_limit is not None and self.consumed > self._inflation_limit:
            raise SnapshotError(f"{self._description}: refused: it inflates to more than {MAX_INFLATION} times its "
                                "size, like a compression bomb; if it is genuine, decompress it yourself and open "
                                "the result")

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = MAX_COMPRESSED_ITEM if self._size is None else max(self._size - self.consumed, 0) + 1
        else:
            self._check_request(n)
        if n <= _CHUNK:
            data = self._stream.read(n)
            self._count(len(data))
            return data
        parts = []  # a large read grows with the data that is there, not with the claim
        left = n
        while left > 0:
            part = self._stream.read(min(left, _CHUNK))
            if not part:
                break
            self._count(len(part))
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        self._check_request(len(view))
        done = 0
        while done < len(view):  # in chunks, so the inflation check sees each one
            got = self._stream.readinto(view[done:done + _CHUNK])
            if not got:
                break
            done += got
            self._count(got)
        return done

    def readline(self, limit: int | None = -1) -> bytes:
        # Protocol 0 arguments are lines: unbounded, one line could inflate without end.
        if self._size is None and (limit is None or limit < 0 or limit > MAX_COMPRESSED_ITEM):
            limit = MAX_COMPRESSED_ITEM + 1
        line = self._stream.readline(-1 if limit is None else limit)
        if self._size is None and len(line) > MAX_COMPRESSED_ITEM:
            raise SnapshotError(f"{self._description}: refused: a line of pickle text longer than "
                                f"{format_bytes(MAX_COMPRESSED_ITEM)}, more than a memory snapshot ever holds")
        self._count(len(line))
        return line

    def peek(self, n: int = 0) -> bytes:
        return self._stream.peek(n)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._stream.close()

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def __enter__(self) -> GuardedStream:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def declared_too_long(description: str, length: int, left: int | None) -> str:
    if left is None:
        return (f"{description}: refused: an object declares {format_bytes(length)}, more than a memory snapshot "
                f"ever holds (limit {format_bytes(MAX_COMPRESSED_ITEM)} in a compressed file)")
    return (f"{description}: corrupt or truncated pickle: an object declares {format_bytes(length)} but only "
            f"{format_bytes(max(left, 0))} of the file remain")


def memory_error_message(source: GuardedStream | SourceInfo, description: str) -> str:
    """One line for a MemoryError while unpickling ``source`` (the stream being read, or
    the file): the false length that caused it when the start of the file holds one."""
    info = source.info if isinstance(source, GuardedStream) else source
    position = source.consumed if isinstance(source, GuardedStream) else 0
    if position <= _DIAGNOSE_LIMIT:  # far into a file, a memory error is more likely real
        found = _scan_start(info)
        if found is not None:
            end, length = found
            return declared_too_long(description, length, info.size - end if info.compression is None else None)
    return f"{description}: not enough memory to read this file"


def _scan_start(info: SourceInfo) -> tuple[int, int] | None:
    from memtui.load.source import open_unguarded

    try:
        with open_unguarded(info) as again:
            data = again.read(_DIAGNOSE_LIMIT + (2 << 20))  # the unpickler reads up to ~1 MiB ahead
    except Exception:  # explaining the first failure must not raise a second one
        return None
    return find_false_length(data, info.size if info.compression is None else None)


# -- walking opcodes without building anything --------------------------------------------------
_OPS = {ord(op.code): op for op in pickletools.opcodes}
_LENGTH_WIDTH = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_TWO_LINES = {"GLOBAL", "INST"}


def find_false_length(data: bytes, size: int | None) -> tuple[int, int] | None:
    """(end, length) of the first opcode in ``data`` declaring more than can follow it,
    ``end`` being where its content would start.

    ``size`` is the whole stream's length when known; otherwise the bound is
    ``MAX_COMPRESSED_ITEM``. Frames are walked through, their lengths checked too. None
    when nothing in ``data`` lies (or it stops being a pickle).
    """
    pos, end = 0, len(data)
    while pos < end:
        op = _OPS.get(data[pos])
        if op is None or op.name == "STOP":
            return None
        pos += 1
        arg = op.arg
        if op.name == "FRAME":
            length = int.from_bytes(data[pos:pos + 8], "little")
            pos += 8
            if _exceeds(length, pos, size):
                return pos, length
        elif arg is None:
            continue
        elif arg.n >= 0:
            pos += arg.n
        elif arg.n == pickletools.UP_TO_NEWLINE:
            for _ in range(2 if op.name in _TWO_LINES else 1):
                newline = data.find(b"\n", pos)
                if newline < 0:
                    return None
                pos = newline + 1
        else:
            width, signed = _LENGTH_WIDTH[arg.n]
            length = int.from_bytes(data[pos:pos + width], "little", signed=signed)
            pos += width
            if _exceeds(length, pos, size):
                return pos, length
            pos += max(length, 0)
    return None


def _exceeds(length: int, pos: int, size: int | None) -> bool:
    if size is not None:
        return length > size - pos + _SLACK
    return length > MAX_COMPRESSED_ITEM
