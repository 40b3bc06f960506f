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
failed allocation (MemoryError) is explained afterwards by
:func:`memtui.load.source.memory_error_message`, which walks the opcodes at the start of
the file (:func:`find_false_length`) to find the declared length that caused it.

Nothing here opens a file: :mod:`memtui.load.source` does, and wraps what it opens in a
:class:`GuardedStream`, so the import goes one way (source -> limits).
"""

from __future__ import annotations

import os
import pickletools
from collections.abc import Callable
from typing import BinaryIO, Protocol

from memtui.errors import SnapshotError
from memtui.load.opcode_check import OpcodeCheck
from memtui.units import format_bytes

# The promise (docs/reliability.md): opening any file adds at most MEMORY_PER_BYTE times its
# decompressed size plus MEMORY_BASE to the process's address space, whatever the bytes
# declare (lengths, counts, memo indices, nesting, repeats). tests/system/test_hostile_inputs.py
# holds every decoder to it under RLIMIT_AS.
MEMORY_PER_BYTE = 20
MEMORY_BASE = 256 << 20


def memory_bound(decompressed_size: int) -> int:
    """The most address space a load of a file of this decompressed size may add."""
    return MEMORY_PER_BYTE * decompressed_size + MEMORY_BASE


MAX_COMPRESSED_ITEM = 256 << 20  # no string in a memory snapshot comes near this
MAX_INFLATION = 1000  # real snapshots inflate ~25x; xz and zstd bombs reach 10,000x and more
INFLATION_FLOOR = 1 << 30  # small files may inflate this much whatever their ratio
_SLACK = 1 << 20  # reads a little past the end are ordinary (a truncated file's last frame)
_CHUNK = 64 << 20  # large reads are made in pieces, so memory grows with the data, not the claim

# JSON is read whole before it is parsed (the standard library has no streaming parser),
# so its text is bounded; a snapshot of millions of events is a pickle, which streams.
MAX_JSON_BYTES = 4 << 30
MAX_JSON_DEPTH = 100  # torch's deepest is 9 (a torch 2.0 block's history frames)
# Containers cost Python 64 bytes or more each: a file packed with empty ones ("[],[],")
# expands twenty-fold in memory. A snapshot's smallest container, a frame dict, takes
# some 40 bytes of JSON; past a million containers, fewer bytes than this each is refused.
_JSON_CONTAINER_FLOOR = 1_000_000
_JSON_BYTES_PER_CONTAINER = 16
# JSON text is measured a megabyte at a time: a nesting bomb is refused after its first
# megabyte, and the measure's temporary arrays (16 bytes a byte of text) stay small.
_SCAN_CHUNK = 1 << 20
_READ_ALL_CHUNK = 4 << 20  # read_all's pieces: what it reads before ``inspect`` sees it
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')


class InflationRefused(SnapshotError):
    """A compressed file inflated past its bound. Every decoder reads through the same
    guard, so the first to meet it says so for all: none falls back to the next."""


class SourceFacts(Protocol):
    """What the guard needs to know of the file (:class:`memtui.load.source.SourceInfo`)."""

    path: str
    size: int
    compression: str | None


class GuardedStream:
    """A binary stream over ``info``'s decompressed content that refuses reads larger than
    the file can satisfy (see the module docstring)."""

    def __init__(self, stream: BinaryIO, info: SourceFacts) -> None:
        self._stream = stream
        self.info = info
        self._description = os.path.basename(info.path)
        self._size = info.size if info.compression is None else None
        self._inflation_limit = None if self._size is not None else max(INFLATION_FLOOR, MAX_INFLATION * info.size)
        self.consumed = 0  # bytes handed out so far
        self.opcodes: OpcodeCheck | None = None

    def check_opcodes(self) -> None:
        """From now on, walk every byte before it is handed out as pickle opcodes
        (:mod:`memtui.load.opcode_check`): a memo index or a length that lies is refused
        before the unpickler acts on it. Called before the first read."""
        assert self.consumed == 0, "the walk starts at the first byte"

        def too_long(length: int, content_at: int) -> str:
            left = None if self._size is None else self._size - content_at
            return declared_too_long(self._description, length, left)

        limit = None if self._size is None else self._size + _SLACK
        self.opcodes = OpcodeCheck(self._description, limit, MAX_COMPRESSED_ITEM, too_long)

    def _walk(self, start: int, data) -> None:
        """Walk ``data``, found at stream offset ``start``, where the walk has not been yet."""
        check = self.opcodes
        if check is not None and not check.done and start + len(data) > check.walked:
            check.feed(memoryview(data)[check.walked - start:] if check.walked > start else data)

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
            raise InflationRefused(f"{self._description}: refused: it inflates to more than {MAX_INFLATION} times its "
                                "size, like a compression bomb; if it is genuine, decompress it yourself and open "
                                "the result")

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = MAX_COMPRESSED_ITEM if self._size is None else max(self._size - self.consumed, 0) + 1
        else:
            self._check_request(n)
        if n <= _CHUNK:
            data = self._stream.read(n)
            self._walk(self.consumed, data)
            self._count(len(data))
            return data
        parts = []  # a large read grows with the data that is there, not with the claim
        left = n
        while left > 0:
            part = self._stream.read(min(left, _CHUNK))
            if not part:
                break
            self._walk(self.consumed, part)
            self._count(len(part))
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def readinto(self, buffer) -> int:
        # Every view of ``buffer`` is released before this returns or raises: a view kept
        # alive by a traceback would keep the caller's bytearray from being freed (CPython
        # reports "deallocated bytearray object has exported buffers").
        with memoryview(buffer) as raw, raw.cast("B") as view:
            self._check_request(len(view))
            done = 0
            while done < len(view):  # in chunks, so the inflation check sees each one
                with view[done:done + _CHUNK] as part:
                    got = self._stream.readinto(part)
                    if not got:
                        break
                    self._walk(self.consumed, part[:got])
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
        self._walk(self.consumed, line)
        self._count(len(line))
        return line

    def read_all(self, limit: int, what: str, inspect: Callable[[bytes], None] | None = None) -> bytearray:
        """Everything left in the stream, refused in one line past ``limit`` bytes;
        ``inspect`` sees each piece as it arrives (and may refuse it by raising)."""
        if self._size is not None and self._size - self.consumed > limit:
            raise SnapshotError(too_large(self._description, what, limit))
        data = bytearray()
        while True:
            part = self._stream.read(_READ_ALL_CHUNK)
            if not part:
                return data
            self._count(len(part))
            if len(data) + len(part) > limit:
                raise SnapshotError(too_large(self._description, what, limit))
            if inspect is not None:
                inspect(part)
            data += part

    def peek(self, n: int = 0) -> bytes:
        # The C unpickler runs opcodes straight from what it peeked, so they are walked now.
        data = self._stream.peek(n)
        self._walk(self.consumed, data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._stream.close()

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def __enter__(self) -> GuardedStream:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            self.close()
        except (MemoryError, OSError):
            # Closing after a failed read (out of memory, say) must not replace the one
            # line that says why the read failed.
            if exc_type is None:
                raise


def declared_too_long(description: str, length: int, left: int | None) -> str:
    if left is None:
        return (f"{description}: refused: an object declares {format_bytes(length)}, more than a memory snapshot "
                f"ever holds (limit {format_bytes(MAX_COMPRESSED_ITEM)} in a compressed file)")
    return (f"{description}: corrupt or truncated pickle: an object declares {format_bytes(length)} but only "
            f"{format_bytes(max(left, 0))} of the file remain")


def too_large(description: str, what: str, limit: int) -> str:
    return (f"{description}: refused: more than {format_bytes(limit)} of {what}, which is read whole; "
            "save a snapshot this large as a pickle (torch.cuda.memory._dump_snapshot)")


class JsonStructure:
    """Measures JSON text piece by piece as it is read (or written): refuses nesting deeper
    than ``MAX_JSON_DEPTH`` at once, and, at :meth:`finish`, text packed with containers
    (see the constants above). Nothing is built from the text.

    Each piece is scanned with numpy: escaped backslashes and quotes are blanked out, all
    but quotes and brackets dropped, then a bracket counts when an even number of quotes
    comes before it, i.e. when it is outside every string. ``replace`` pairs backslashes from the start of each run,
    as JSON does; an odd run at the end of a piece holds its last one for the next.
    Malformed text may be measured wrongly; the parser refuses it afterwards anyway.
    """

    def __init__(self, description: str) -> None:
        import numpy as np

        self._np = np
        self._steps_of = np.zeros(256, np.int8)
        self._steps_of[[ord("["), ord("{")]] = 1
        self._steps_of[[ord("]"), ord("}")]] = -1
        self.description = description
        self.depth = self.deepest = self.containers = self.size = 0
        self._in_string = 0
        self._held = b""  # backslashes at the end of the last piece

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        for pos in range(0, len(view), _SCAN_CHUNK):
            self._scan(view[pos:pos + _SCAN_CHUNK])

    def finish(self) -> None:
        self._scan(b"", last=True)
        if self.containers > _JSON_CONTAINER_FLOOR and self.containers * _JSON_BYTES_PER_CONTAINER > self.size:
            raise SnapshotError(f"{self.description}: refused: {self.containers:,} JSON objects and arrays in "
                                f"{format_bytes(self.size)}, which no memory snapshot packs so tightly (a file "
                                "built to expand in memory)")

    def _scan(self, part, last: bool = False) -> None:
        np = self._np
        self.size += len(part)
        piece = self._held + bytes(part)
        # Only the parity of a trailing run of backslashes matters: an odd one keeps its last
        # backslash back, to escape (or pair with) what the next piece starts with.
        kept = (len(piece) - len(piece.rstrip(b"\\"))) & 1 if not last else 0
        self._held = piece[len(piece) - kept:] if kept else b""
        piece = piece[:len(piece) - kept].replace(b"\\\\", b"__").replace(b'\\"', b"__")
        codes = np.frombuffer(piece.translate(None, _NOT_STRUCTURE), np.uint8)  # quotes and brackets only
        is_quote = codes == 0x22
        quotes_before = np.cumsum(is_quote, dtype=np.int64) + self._in_string
        steps = self._steps_of[codes][((quotes_before & 1) == 0) & ~is_quote]
        if len(codes):
            self._in_string = int(quotes_before[-1]) & 1
        if not len(steps):
            return
        levels = np.cumsum(steps, dtype=np.int64) + self.depth
        self.deepest = max(self.deepest, int(levels.max()))
        self.depth = int(levels[-1])
        self.containers += int(np.count_nonzero(steps > 0))
        if self.deepest > MAX_JSON_DEPTH:
            raise SnapshotError(f"{self.description}: refused: JSON nested more than {MAX_JSON_DEPTH} deep, which "
                                "no memory snapshot is")


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
