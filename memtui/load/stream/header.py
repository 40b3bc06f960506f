"""Find the first trace entry of an unframed pickle, and how later entries will spell their keys.

The part of a snapshot before its first trace entry (the segments and their blocks) is
small, so it is walked here opcode by opcode with a light model of the unpickler's stack
and memo. The walk stops after the first entry dict, whose keys tell the rewriter the
exact bytes every later entry uses to refer to them (a BINGET of the key's memo slot).
Any opcode a memory snapshot never needs (globals, objects, text protocols) ends the walk:
the plain path, which refuses globals by name, deals with such files.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from memtui.load.stream.errors import StreamFallback

_FIXED_ARG = {"J": 4, "K": 1, "M": 2, "G": 8, "h": 1, "j": 4, "q": 1, "r": 4, "\x80": 1}
_LEN1_ARG = {"\x8a", "U", "C", "\x8c"}
_LEN4_ARG = {"\x8b", "T", "B", "X"}
_LEN8_ARG = {"\x8e", "\x96", "\x8d"}
_STRINGS = {"\x8c", "X", "\x8d"}
_SCALARS = set("JKMG\x8a\x8bTBUC\x8e\x96N\x88\x89") | {")", "\x8f"}
_POP_TO_MARK_PUSH_ONE = set("ltd\x91")
_POP_TO_MARK = set("eu\x901")

MARK = object()


@dataclass
class _Str:
    value: str
    ref: bytes | None = None  # how a later BINGET spells this string


@dataclass
class _Container:
    kind: str
    pos: int


def get_ref(index: int) -> bytes:
    """The bytes of a BINGET (or LONG_BINGET) of memo slot ``index``, as picklers write it."""
    return b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)


@dataclass
class FirstEntry:
    """Where the first trace begins and what its first entry taught us."""

    list_pos: int  # offset of the EMPTY_LIST that starts the trace list
    end: int  # offset just after the first entry's SETITEMS
    key_refs: dict[str, bytes] = field(default_factory=dict)


def find_first_entry(buf: bytes) -> FirstEntry | None:
    """Walk ``buf`` (unframed, starting with PROTO); None when more bytes are needed.

    Raises StreamFallback for anything that is not a plain-data snapshot laid out as torch
    writes it.
    """
    stack: list[object] = []
    memo: dict[int, object] = {}
    entry: _Container | None = None
    found: FirstEntry | None = None
    pos, n = 0, len(buf)
    while pos < n:
        op = chr(buf[pos])
        start = pos
        pos += 1
        if op in _FIXED_ARG:
            size = _FIXED_ARG[op]
            arg = buf[pos:pos + size]
            pos += size
        elif op in _LEN1_ARG:
            if pos >= n:
                return None
            size = buf[pos]
            arg = buf[pos + 1:pos + 1 + size]
            pos += 1 + size
        elif op in _LEN4_ARG or op in _LEN8_ARG:
            width = 4 if op in _LEN4_ARG else 8
            size = int.from_bytes(buf[pos:pos + width], "little")
            arg = buf[pos + width:pos + width + size]
            pos += width + size
        else:
            arg = b""
        if pos > n:
            return None

        if op in _STRINGS:
            try:
                stack.append(_Str(arg.decode("utf-8", "surrogatepass")))
            except UnicodeDecodeError:
                raise StreamFallback("a string that is not UTF-8") from None
        elif op in _SCALARS:
            stack.append(None)
        elif op == "]":
            stack.append(_Container("list", start))
        elif op == "}":
            stack.append(_Container("dict", start))
        elif op == "(":
            stack.append(MARK)
        elif op in ("\x94", "q", "r"):
            if not stack:
                raise StreamFallback("memoize with an empty stack")
            index = len(memo) if op == "\x94" else int.from_bytes(arg, "little")
            memo[index] = stack[-1]
            if isinstance(stack[-1], _Str) and stack[-1].ref is None:
                stack[-1].ref = get_ref(index)
        elif op in ("h", "j"):
            index = int.from_bytes(arg, "little")
            if index not in memo:
                raise StreamFallback("a reference to a memo slot never filled")
            stack.append(memo[index])
        elif op in _POP_TO_MARK or op in _POP_TO_MARK_PUSH_ONE:
            items = _pop_to_mark(stack)
            if op == "u" and entry is not None and stack and stack[-1] is entry:
                found = FirstEntry(list_pos=found.list_pos, end=pos, key_refs=_key_refs(items))
                return found
            if op in _POP_TO_MARK_PUSH_ONE:
                stack.append(None)
        elif op == "a":
            _pop(stack, 1)
        elif op == "s":
            _pop(stack, 2)
        elif op in ("\x85", "\x86", "\x87"):
            _pop(stack, ord(op) - 0x84)
            stack.append(None)
        elif op == "0":
            _pop(stack, 1)
        elif op == "\x80":
            pass
        elif op == ".":
            raise StreamFallback("no trace entry in the snapshot")
        else:
            raise StreamFallback(f"opcode {op!r} at offset {start} is not plain snapshot data")

        if entry is None and op in _STRINGS | {"h", "j"} and _is_first_key(stack, buf):
            entry = stack[-3]
            trace_list = stack[-4] if stack[-4] is not MARK else stack[-5]
            found = FirstEntry(list_pos=trace_list.pos, end=-1)
    return None


def _is_first_key(stack: list[object], buf: bytes) -> bool:
    """True when the top of the stack is the key 'action' opening a dict that opens a list."""
    if len(stack) < 4 or not isinstance(stack[-1], _Str) or stack[-1].value != "action" or stack[-2] is not MARK:
        return False
    entry = stack[-3]
    if not isinstance(entry, _Container) or entry.kind != "dict":
        return False
    below = stack[-4] if stack[-4] is not MARK else (stack[-5] if len(stack) >= 5 else None)
    if not isinstance(below, _Container) or below.kind != "list":
        return False
    # The trace list must be fresh and memoized, its first entry right after it.
    between = buf[below.pos:entry.pos]
    return between in (b"]\x94", b"]\x94(") and buf[entry.pos:entry.pos + 3] == b"}\x94("


def _key_refs(items: list[object]) -> dict[str, bytes]:
    refs = {}
    for key in items[0::2]:
        if isinstance(key, _Str) and key.ref is not None:
            refs.setdefault(key.value, key.ref)
    return refs


def _pop_to_mark(stack: list[object]) -> list[object]:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is MARK:
            items = stack[i + 1:]
            del stack[i:]
            return items
    raise StreamFallback("a MARK is missing")


def _pop(stack: list[object], count: int) -> None:
    if len(stack) < count:
        raise StreamFallback("stack underflow")
    del stack[len(stack) - count:]
