"""The shape check: the start of a pickle must look like a snapshot before anything big is built.

A compressed file of a few hundred kilobytes can inflate to gigabytes of a list of
integers, or of one trace entry named a billion times by memo reference; an uncompressed
one can open with a FRAME that claims two gigabytes of zeros. Every decoder would build
(or read) a great deal before it could tell. Here the first ``WINDOW`` bytes of the
decompressed content are walked opcode by opcode, keeping only a sketch of the
unpickler's stack (what kind of object each entry is, and for the containers, what they
hold in a snapshot), and three things no snapshot does are refused in one line:

* the top-level object is a list whose first element is not a dict (a snapshot is a dict
  with ``segments``/``device_traces``, or, from torch < 2.1, a list of segment dicts);
* an entry of a device trace is a memo reference to an earlier dict: torch writes every
  entry afresh, and repeating one by reference costs two bytes a row;
* a FRAME longer than ``MAX_FRAME`` (picklers write frames of about 64 KiB).

Everything else, including what is merely malformed, is left to the decoders, which say
what is wrong in their own words; the walk stops at the first opcode it does not follow.
It reads at most ``WINDOW`` bytes and ``MAX_OPS`` opcodes, so it costs milliseconds.
"""

from __future__ import annotations

import os
import struct

from memtui.errors import SnapshotError
from memtui.load.limits import MAX_COMPRESSED_ITEM, declared_too_long
from memtui.load.source import SourceInfo, open_unguarded
from memtui.units import format_bytes

WINDOW = 1 << 20
MAX_OPS = 30_000  # real snapshots reach their first trace within about 23,000 (a 3,000-block segment list)
ENTRIES_SEEN = 64  # entries of the first trace looked at, then the walk ends
MAX_FRAME = 64 << 20

_MARK = object()
_SCALAR = "scalar"
_NOT_SEGMENTS = {"int", "scalar", "str", "list", "tuple"}


class _Container:
    """A dict or list on the sketched stack, with its role in a snapshot ("top", "traces",
    "trace") and how many items were pushed for it so far."""

    __slots__ = ("kind", "role", "items")

    def __init__(self, kind: str, role: str | None) -> None:
        self.kind = kind
        self.role = role
        self.items = 0


class _Ref:
    """An object pushed from the memo (a GET): which kind it was when it was stored."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind


class _Text:
    __slots__ = ("value",)

    def __init__(self, value: str | None) -> None:
        self.value = value


class _Stop(Exception):
    """The walk goes no further (an opcode it does not follow, the end of the window)."""


def check_start(info: SourceInfo) -> None:
    """Refuse ``info``'s file in one line if its start shows it is no snapshot (see above)."""
    try:
        with open_unguarded(info) as stream:
            data = stream.read(WINDOW)
    except Exception:  # unreadable or corrupt: the decoders say which, in their words
        return
    if data[:1] != b"\x80" and data[:1] not in _OLD_PROTOCOL_STARTS:
        return  # JSON, an export or no pickle at all: not this check's business
    _Walk(data, info).run()


_OLD_PROTOCOL_STARTS = {b"(", b"]", b"}"}


class _Walk:
    def __init__(self, data: bytes, info: SourceInfo) -> None:
        self.data = data
        self.info = info
        self.description = os.path.basename(info.path)
        self.stack: list = []
        self.marks: list[int] = []  # where the MARKs on the stack are
        self.memo: dict[int, str] = {}
        self.seen_container = False
        self.entries = 0

    def run(self) -> None:
        try:
            self._walk()
        except (_Stop, IndexError, struct.error, UnicodeDecodeError):
            return

    def _walk(self) -> None:
        data, pos, end = self.data, 0, len(self.data)
        for _ in range(MAX_OPS):
            if pos >= end:
                return
            op = data[pos]
            pos += 1
            handler = _HANDLERS.get(op)
            if handler is None:
                return
            pos = handler(self, data, pos)

    # -- the stack sketch -------------------------------------------------------------------
    def push(self, item) -> None:
        owner, key = self._owner(item)
        if owner is not None:
            owner.items += 1
            self._check(owner, key, item)
        if isinstance(item, _Container):
            item.role = _role_of(owner, key, first=not self.seen_container)
            self.seen_container = True
        self.stack.append(item)

    def _owner(self, item) -> tuple[_Container | None, str | None]:
        """The container an object pushed now goes into, as far as the stack shows it, and
        the key it is stored under when that is a dict.

        Right after a container, a push is either its element (APPEND, SETITEM: no MARK in
        between) or its next sibling in a batch; what each role holds tells them apart (a
        trace holds entry dicts, the trace list holds traces). Otherwise it belongs to the
        container below the topmost MARK, or, with none, is a SETITEM value under the key
        on top.
        """
        stack = self.stack
        if not stack:
            return None, None
        top = stack[-1]
        if isinstance(top, _Container) and _takes(top, item):
            return top, None
        mark = self.marks[-1] if self.marks else None
        if mark is None:
            if len(stack) >= 2 and isinstance(stack[-2], _Container) and stack[-2].kind == "dict":
                return stack[-2], top.value if isinstance(top, _Text) else None
            return None, None
        owner = stack[mark - 1] if mark > 0 else None
        if not isinstance(owner, _Container):
            return None, None
        if owner.kind == "dict":
            if (len(stack) - mark - 1) % 2 == 0:
                return owner, None  # a key
            return owner, top.value if isinstance(top, _Text) else None
        return owner, None

    def _check(self, owner: _Container, key: str | None, item) -> None:
        if owner.role == "top" and owner.kind == "list" and owner.items == 1 and _kind(item) in _NOT_SEGMENTS:
            raise SnapshotError(f"{self.description}: not a memory snapshot (a list of {_kind(item)}, not of "
                                "segments)")
        if owner.role == "trace":
            if isinstance(item, _Ref) and item.kind == "dict":
                raise SnapshotError(f"{self.description}: refused: a device trace repeats an entry by reference, "
                                    "which torch never writes (a file built to expand in memory)")
            self.entries += 1
            if self.entries >= ENTRIES_SEEN:
                raise _Stop  # seen enough: the rest is the decoders' to read
        elif owner.role == "top" and owner.kind == "list":
            raise _Stop  # its first element was a dict: nothing more to look at

    def mark(self) -> None:
        self.marks.append(len(self.stack))
        self.stack.append(_MARK)

    def pop_to_mark(self) -> None:
        if not self.marks:
            raise _Stop
        del self.stack[self.marks.pop():]

    def pop(self, n: int = 1) -> None:
        keep = len(self.stack) - n
        if keep < 0 or (self.marks and self.marks[-1] >= keep):
            raise _Stop  # a pop through a MARK: not something this sketch follows
        del self.stack[keep:]

    def remember(self, index: int) -> None:
        if not self.stack:
            raise _Stop
        self.memo[index] = _kind(self.stack[-1])

    def frame(self, length: int, pos: int) -> None:
        size = self.info.size if self.info.compression is None else None
        if size is not None and length > size - pos + (1 << 20):
            raise SnapshotError(declared_too_long(self.description, length, size - pos))
        if size is None and length > MAX_COMPRESSED_ITEM:
            raise SnapshotError(declared_too_long(self.description, length, None))
        if length > MAX_FRAME:
            raise SnapshotError(f"{self.description}: not a readable pickle (a frame of {format_bytes(length)}, "
                                f"where picklers write frames of 64 KiB)")


def _kind(item) -> str:
    if isinstance(item, _Container):
        return item.kind
    if isinstance(item, _Ref):
        return item.kind
    if isinstance(item, _Text):
        return "str"
    return "mark" if item is _MARK else item


def _takes(container: _Container, item) -> bool:
    """Whether ``item``, pushed right after ``container``, is its element rather than its sibling."""
    if container.role == "trace":
        return _kind(item) == "dict"
    if container.role == "traces":
        return _kind(item) == "list"
    if container.kind == "dict" or container.role == "top":
        return True
    return not isinstance(item, _Text)  # a str after a value is the next key of the dict around them


def _role_of(owner: _Container | None, key: str | None, first: bool) -> str | None:
    if owner is None:
        return "top" if first else "inner"
    if owner.role == "top" and owner.kind == "dict" and key == "device_traces":
        return "traces"
    if owner.role == "traces":
        return "trace"
    return "inner"


# -- opcodes ---------------------------------------------------------------------------------
def _scalar(width: int, kind: str = _SCALAR):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        walk.push(kind)
        return pos + width
    return handle


def _sized(width: int, fmt: str, kind: str):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        (length,) = struct.unpack_from(fmt, data, pos)
        pos += width
        if length < 0 or pos + length > len(data):
            raise _Stop
        if kind == "str":
            walk.push(_Text(data[pos:pos + length].decode("utf-8", "surrogatepass") if length <= 64 else None))
        else:
            walk.push(kind)
        return pos + length
    return handle


def _line(kind: str):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        newline = data.find(b"\n", pos)
        if newline < 0:
            raise _Stop
        walk.push(kind)
        return newline + 1
    return handle


def _container(kind: str, from_mark: bool = False):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        if from_mark:
            walk.pop_to_mark()
        walk.push(_Container(kind, None))
        return pos
    return handle


def _mark(walk: _Walk, data: bytes, pos: int) -> int:
    walk.mark()
    return pos


def _to_mark(walk: _Walk, data: bytes, pos: int) -> int:
    walk.pop_to_mark()
    return pos


def _popping(n: int):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        walk.pop(n)
        return pos
    return handle


def _tuple(n: int):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        walk.pop(n)
        walk.push("tuple")
        return pos
    return handle


def _tuple_from_mark(walk: _Walk, data: bytes, pos: int) -> int:
    walk.pop_to_mark()
    walk.push("tuple")
    return pos


def _put(width: int, fmt: str):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        (index,) = struct.unpack_from(fmt, data, pos)
        walk.remember(index)
        return pos + width
    return handle


def _put_line(walk: _Walk, data: bytes, pos: int) -> int:
    newline = data.find(b"\n", pos)
    if newline < 0:
        raise _Stop
    walk.remember(int(data[pos:newline]))
    return newline + 1


def _memoize(walk: _Walk, data: bytes, pos: int) -> int:
    walk.remember(len(walk.memo))
    return pos


def _get(width: int, fmt: str):
    def handle(walk: _Walk, data: bytes, pos: int) -> int:
        (index,) = struct.unpack_from(fmt, data, pos)
        walk.push(_Ref(walk.memo.get(index, "unknown")))
        return pos + width
    return handle


def _get_line(walk: _Walk, data: bytes, pos: int) -> int:
    newline = data.find(b"\n", pos)
    if newline < 0:
        raise _Stop
    walk.push(_Ref(walk.memo.get(int(data[pos:newline]), "unknown")))
    return newline + 1


def _proto(walk: _Walk, data: bytes, pos: int) -> int:
    return pos + 1


def _frame(walk: _Walk, data: bytes, pos: int) -> int:
    (length,) = struct.unpack_from("<Q", data, pos)
    walk.frame(length, pos + 8)
    return pos + 8


def _dup(walk: _Walk, data: bytes, pos: int) -> int:
    if not walk.stack:
        raise _Stop
    walk.stack.append(walk.stack[-1])
    return pos


_HANDLERS = {
    0x80: _proto, 0x95: _frame, ord("("): _mark, ord("."): None,
    ord("N"): _scalar(0), 0x88: _scalar(0), 0x89: _scalar(0),
    ord("K"): _scalar(1, "int"), ord("M"): _scalar(2, "int"), ord("J"): _scalar(4, "int"),
    ord("G"): _scalar(8), 0x8A: _sized(1, "<B", "int"), 0x8B: _sized(4, "<i", "int"),
    ord("I"): _line("int"), ord("L"): _line("int"), ord("F"): _line(_SCALAR), ord("S"): _line("str"),
    ord("V"): _line("str"),
    0x8C: _sized(1, "<B", "str"), ord("X"): _sized(4, "<I", "str"), 0x8D: _sized(8, "<Q", "str"),
    ord("C"): _sized(1, "<B", _SCALAR), ord("B"): _sized(4, "<I", _SCALAR), 0x8E: _sized(8, "<Q", _SCALAR),
    ord("U"): _sized(1, "<B", _SCALAR), ord("T"): _sized(4, "<i", _SCALAR), 0x96: _sized(8, "<Q", _SCALAR),
    ord("}"): _container("dict"), ord("]"): _container("list"),
    ord("d"): _container("dict", from_mark=True), ord("l"): _container("list", from_mark=True),
    ord(")"): _tuple(0), 0x85: _tuple(1), 0x86: _tuple(2), 0x87: _tuple(3), ord("t"): _tuple_from_mark,
    ord("a"): _popping(1), ord("e"): _to_mark, ord("s"): _popping(2), ord("u"): _to_mark,
    ord("0"): _popping(1), ord("1"): _to_mark, ord("2"): _dup,
    0x94: _memoize, ord("p"): _put_line, ord("q"): _put(1, "<B"), ord("r"): _put(4, "<I"),
    ord("g"): _get_line, ord("h"): _get(1, "<B"), ord("j"): _get(4, "<I"),
}
_HANDLERS = {op: handler for op, handler in _HANDLERS.items() if handler is not None}
