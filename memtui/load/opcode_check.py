"""The opcodes a pickle asks the unpickler to run, checked before the unpickler sees them.

The C unpickler trusts two kinds of numbers in a file that make it allocate memory the
file does not hold:

* a memo index (``LONG_BINPUT``, protocol 0's ``PUT``): storing to slot ``i`` grows the
  memo to ``2 * i`` pointers at once, so the 9 bytes ``PROTO NONE LONG_BINPUT 2**28 STOP``
  allocate and clear 4 GiB. A pickler numbers its memo slots from 0 as it stores them, one
  opcode (at least one byte) each, so no index it writes reaches the offset of the opcode
  that writes it: past that, the index is a lie, refused here in one line;
* a declared length (strings, bytes, integers, frames): bytes objects are allocated before
  their content is read, and the others are asked of the file in one read.

:class:`OpcodeCheck` walks the stream piece by piece as :class:`memtui.load.limits.GuardedStream`
hands it out (a frame's content is opcodes like any other), so a lie is refused before the
unpickler runs the opcode that tells it. The walk stops at STOP or at a byte that is not an
opcode: the unpickler stops there too. The compiled extension walks the same way, faster
(``_native.OpcodeWalker``); this module is the reference and the fallback.
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable

from memtui.compiled import native
from memtui.errors import SnapshotError

# What follows an opcode, by opcode byte: a fixed number of bytes, a length of some width and
# that many bytes, or lines.
FIXED, COUNTED, LINE, TWO_LINES, PUT, LONG_BINPUT, FRAME, STOP, UNKNOWN = range(9)

KIND = [UNKNOWN] * 256
SIZE = [0] * 256  # FIXED: bytes after the opcode; COUNTED: width of the length
SIGNED = [False] * 256  # a COUNTED length read as signed (the unpickler refuses a negative one)
_WIDTH = {-2: 1, -3: 4, -4: 4, -5: 8}  # pickletools' TAKEN_FROM_ARGUMENT codes
for _op in pickletools.opcodes:
    _code, _arg = ord(_op.code), _op.arg
    if _op.name in ("STOP", "FRAME", "LONG_BINPUT", "PUT"):
        KIND[_code] = {"STOP": STOP, "FRAME": FRAME, "LONG_BINPUT": LONG_BINPUT, "PUT": PUT}[_op.name]
        SIZE[_code] = _arg.n if _arg is not None and _arg.n > 0 else 0
    elif _arg is None or _arg.n >= 0:
        KIND[_code], SIZE[_code] = FIXED, (_arg.n if _arg is not None else 0)
    elif _arg.n == pickletools.UP_TO_NEWLINE:
        KIND[_code] = TWO_LINES if _op.name in ("GLOBAL", "INST") else LINE
    else:
        KIND[_code], SIZE[_code] = COUNTED, _WIDTH[_arg.n]
        SIGNED[_code] = _arg.name in ("string4", "long4")
del _op, _code, _arg
# Opcodes that make a container (a list, dict, set or tuple: 56 to 80 bytes of memory each).
CONTAINERS = frozenset(b"]}ldt\x85\x86\x87\x8f\x91")
# Fixed-size opcodes as their whole length (opcode included), 0 for the others: the inner loop.
# Containers are counted outside it.
STEP = bytes(SIZE[c] + 1 if KIND[c] == FIXED and c not in CONTAINERS else 0 for c in range(256))
# Past a million containers, a file must spend this many bytes on each: a pickle of empty
# lists ("]]]]") would make 80 bytes of memory of each byte. Torch spends some 40 a container
# (an entry dict and its frame list in about 90 bytes).
CONTAINER_FLOOR = 1_000_000
BYTES_PER_CONTAINER = 16
_LONGEST_FIXED = max(STEP)
_PUT_DIGITS = 40  # a PUT index longer than this is no index a pickler writes


def packed_message(description: str, containers: int, size: int) -> str:
    return (f"{description}: refused: {containers:,} lists, dicts and tuples in the first {size:,} bytes, which no "
            "memory snapshot packs so tightly (a file built to expand in memory)")


def memo_index_message(description: str, index: int, offset: int) -> str:
    return (f"{description}: refused: the pickle stores to memo slot {index:,} at byte {offset:,}, beyond any "
            "slot a pickler numbers there (the reader would allocate memory the file does not hold)")


# None without a C compiler (or an extension built before it had the walk): the walk below
# does the same, slower.
_walk_native = getattr(native, "walk_opcodes", None)
_END, _CUT, _LINE, _DONE, _MEMO, _LENGTH = range(6)  # what _native.walk_opcodes stopped at


class OpcodeCheck:
    """Walks a pickle's opcodes across the pieces :meth:`feed` is given (see the module
    docstring). A declared length is a lie past ``limit`` less the offset its content would
    start at (``limit``: the stream's size plus some slack), or, with no limit (a compressed
    stream), past ``per_item``; ``too_long(length, offset)`` words the refusal."""

    def __init__(self, description: str, limit: int | None, per_item: int,
                 too_long: Callable[[int, int], str], native: bool = True) -> None:
        self.description = description
        self._limit = limit
        self._per_item = per_item
        self._too_long = too_long
        self._native = _walk_native if native else None
        self.walked = 0  # stream offset of the next byte to walk
        self.done = False
        self._held = b""  # the start of an opcode cut by the end of a piece
        self._skip = 0  # content bytes of a counted object still to pass over
        self._lines = 0  # newlines still to pass for the current opcode
        self._put: bytearray | None = None  # the digits of a PUT index as they arrive
        self._put_at = 0
        self.containers = 0

    def feed(self, data) -> None:
        """Walk the next bytes of the stream; raise SnapshotError at a lie."""
        if self.done:
            self.walked += len(data)
            return
        base = self.walked - len(self._held)  # stream offset of data[0]
        self.walked += len(data)
        if self._held:
            data = self._held + bytes(data)
            self._held = b""
        end = len(data)
        pos = self._resume(data)
        walk = self._walk_compiled if self._native is not None else self._walk
        while pos < end and not self.done:
            pos = walk(data, pos, base)
            if pos < 0:  # an opcode's header is cut: kept for the next piece
                return
            if pos < end and not self.done:
                pos = self._special(data, pos, base)
                if pos < 0:
                    return
        if pos > end:  # a counted object's content goes on into the next pieces
            self._skip = pos - end
        self._check_containers()

    def _check_containers(self) -> None:
        if self.containers > CONTAINER_FLOOR and self.containers * BYTES_PER_CONTAINER > self.walked:
            raise SnapshotError(packed_message(self.description, self.containers, self.walked))

    def _walk_compiled(self, data, pos: int, base: int) -> int:
        """Walk up to the next opcode the Python side must look at (a line), the end, or -1."""
        limit = -1 if self._limit is None else self._limit
        status, pos, a, b, containers = self._native(data, pos, base, limit, self._per_item)
        self.containers += containers
        if status == _CUT:
            self._held = bytes(data[pos:])
            return -1
        if status == _DONE:
            self.done = True
        elif status == _MEMO:
            raise SnapshotError(memo_index_message(self.description, a, b))
        elif status == _LENGTH:
            raise SnapshotError(self._too_long(a, b))
        return pos

    def _walk(self, data, pos: int, base: int) -> int:
        """The same walk in Python: fixed-size opcodes here, the others in :meth:`_special`."""
        end = len(data)
        step = STEP
        safe = end - _LONGEST_FIXED  # below this, a fixed-size opcode ends inside the piece
        while pos < end:
            while pos < safe:
                width = step[data[pos]]
                if not width:
                    break
                pos += width
            if pos >= end:
                return pos
            width = step[data[pos]]
            if not width:
                pos = self._special(data, pos, base)
                if pos < 0 or self.done or self._lines:
                    return pos
                continue
            if pos + width > end:
                self._held = bytes(data[pos:])
                return -1
            pos += width
        return pos

    def _resume(self, data) -> int:
        pos = 0
        if self._skip:
            pos = min(self._skip, len(data))
            self._skip -= pos
        if self._lines:
            pos = self._pass_lines(data, pos)
        return pos

    def _pass_lines(self, data, pos: int) -> int:
        while self._lines:
            newline = data.find(b"\n", pos)
            stop = len(data) if newline < 0 else newline
            if self._put is not None and len(self._put) <= _PUT_DIGITS:
                self._put += data[pos:stop][:_PUT_DIGITS + 1]
            if newline < 0:
                return len(data)
            pos = newline + 1
            self._lines -= 1
        if self._put is not None:
            self._check_put()
        return pos

    def _check_put(self) -> None:
        digits, self._put = bytes(self._put), None
        if len(digits) > _PUT_DIGITS and digits.strip().isdigit():
            raise SnapshotError(memo_index_message(self.description, int(digits[:_PUT_DIGITS]), self._put_at))
        try:
            index = int(digits)
        except ValueError:
            self.done = True  # the unpickler refuses it there
            return
        if index > self._put_at:
            raise SnapshotError(memo_index_message(self.description, index, self._put_at))

    def _lie(self, length: int, content_at: int) -> bool:
        if self._limit is None:
            return length > self._per_item
        return length > max(self._limit - content_at, 0)

    def _special(self, data, pos: int, base: int) -> int:
        """Walk the opcode at ``pos`` that is not of fixed size; the position after it (past
        the piece's end for content still to come), or -1 when its header is cut."""
        op = data[pos]
        kind = KIND[op]
        end = len(data)
        if op in CONTAINERS:
            self.containers += 1
            return pos + 1
        if kind == COUNTED or kind == FRAME:
            width = SIZE[op]
            if pos + 1 + width > end:
                self._held = bytes(data[pos:])
                return -1
            length = int.from_bytes(data[pos + 1:pos + 1 + width], "little", signed=SIGNED[op])
            after = pos + 1 + width
            if length < 0:
                self.done = True  # refused by the unpickler as it reads it
                return after
            if self._lie(length, base + after):
                raise SnapshotError(self._too_long(length, base + after))
            return after if kind == FRAME else after + length
        if kind == LONG_BINPUT:
            if pos + 5 > end:
                self._held = bytes(data[pos:])
                return -1
            index = int.from_bytes(data[pos + 1:pos + 5], "little")
            if index > base + pos:
                raise SnapshotError(memo_index_message(self.description, index, base + pos))
            return pos + 5
        if kind == LINE or kind == TWO_LINES or kind == PUT:
            self._lines = 2 if kind == TWO_LINES else 1
            if kind == PUT:
                self._put, self._put_at = bytearray(), base + pos
            return self._pass_lines(data, pos + 1)
        self.done = True  # STOP, or a byte that is not an opcode: the unpickler ends there
        return pos + 1
