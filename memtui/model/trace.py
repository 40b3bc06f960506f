"""One device's trace as numpy columns, built batch by batch without keeping the entry dicts.

Both loaders feed the same :class:`TraceBuilder`: the plain path hands it a whole list of
entry dicts, the streaming decoder hands it each batch of about a thousand entries as the
unpickler produces them and lets the dicts go. The model must not depend on where the
batches fall, so every id is assigned in entry order or at :meth:`TraceBuilder.finish`:
compile contexts and user metadata are collected per trace and interned into the shared
string table when the trace is finished (contexts first, then metadata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from memtui.errors import SnapshotError
from memtui.model.actions import ActionTable
from memtui.model.columns import float_column, int_column, narrowest
from memtui.model.frames import FrameTable, StackTable, UnplainValue
from memtui.model.metadata import dict_text
from memtui.model.strings import StringTable, text_of

NO_VALUE = -1

# Every key of a trace entry the model reads, and the column of TraceColumns it fills: the one
# list the other readers are checked against (the compiled scanner's key table in
# src/memtui_native/tables.c, the fast path's columns in memtui/load/fast, the columns memtui/open.py
# leaves to the streaming decoder; tests/unit/test_entry_fields.py). A key torch adds that is not
# here is kept by nobody; one here that the scanner does not read sends a file to the slower decoder.
ENTRY_FIELDS: dict[str, str] = {
    "action": "action", "addr": "addr", "size": "size", "stream": "stream", "time_us": "time_us",
    "compile_context": "ctx", "user_metadata": "meta", "frames": "stack", "cpp_frames": "stack",
    "device_free": "device_free", "forward_frames": "fwd", "pool_id": "pool",
}

# The keys every entry torch writes has: one C-level pass takes them all.
_MAIN_KEYS = ("action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata")
_MAIN_FIELDS = itemgetter(*_MAIN_KEYS)
# (entry key, default, column name, wide): the integer columns, in the order their
# warnings are reported.
_INT_FIELDS = (
    ("addr", 0, "addr", True),
    ("size", 0, "size", False),
    ("stream", 0, "stream", False),
)


# Columns of ids and small numbers, stored narrow (see TraceColumns).
NARROW_COLUMNS = ("action", "size", "stream", "stack", "ctx", "meta", "device_free", "fwd", "pool")


@dataclass
class TraceColumns:
    """Column i describes trace entry i of this device."""

    # The columns in NARROW_COLUMNS are as narrow as their values allow (int8 to int64,
    # model/columns.py narrowest): widen one before arithmetic past +-1.
    action: np.ndarray  # action code
    addr: np.ndarray  # int64 (uint64 or object past 63 bits)
    size: np.ndarray  # bytes (as narrow as the largest needs: widen before multiplying)
    stream: np.ndarray
    time_us: np.ndarray  # float64, NaN when the entry had no time
    stack: np.ndarray  # stack id, -1 when the entry had no frames
    ctx: np.ndarray  # string id of compile_context
    meta: np.ndarray  # string id of user_metadata (a dict as its compact JSON)
    device_free: np.ndarray  # -1 except on oom entries
    fwd: np.ndarray  # stack id of forward_frames (the forward traceback of a backward op), -1 when none
    pool: np.ndarray  # index into ``pools`` of the entry's pool_id (newer torch), -1 when none
    pools: list[tuple[int, ...]]  # the distinct pool_id tuples the entries name, in order of first appearance

    def __len__(self) -> int:
        return len(self.action)


@dataclass
class ModelTables:
    """The tables every device's columns refer to, shared while a snapshot is built."""

    strings: StringTable
    frames: FrameTable
    stacks: StackTable
    actions: ActionTable
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def new(cls) -> ModelTables:
        strings = StringTable([""])
        frames = FrameTable(strings)
        return cls(strings, frames, StackTable(frames), ActionTable())


class _DictValue(tuple[str]):
    """A dict where a string belongs (user_metadata), keyed by its compact JSON."""


class _LocalStrings:
    """Strings of one column, numbered locally until the trace is finished."""

    def __init__(self) -> None:
        self.ids: dict[object, int] = {}
        self.values: list[object] = []

    def column(self, values: Sequence[Any], strict: bool) -> np.ndarray:
        try:
            local = list(map(self.ids.get, values, repeat(-1)))
        except TypeError:  # a list or dict where a string belongs: a dict by its JSON, else its text
            values = [v if _is_hashable(v) else _DictValue((dict_text(v),)) if isinstance(v, dict) else text_of(v)
                      for v in values]
            local = list(map(self.ids.get, values, repeat(-1)))
        if -1 in local:
            for i, v in enumerate(values):
                if local[i] == -1:
                    if strict and type(v) is not str and v is not None and type(v) is not _DictValue:
                        raise UnplainValue(f"a string field holds a {type(v).__name__}")
                    local[i] = self._add(v)
        return np.asarray(local, np.int32)

    def _add(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found

    def to_global(self, strings: StringTable) -> np.ndarray:
        ids = []
        for v in self.values:
            if type(v) is _DictValue:
                sid = strings.intern(v[0])
                strings.dict_ids.add(sid)
            else:
                sid = strings.intern(v)
            ids.append(sid)
        return np.asarray(ids or [0], np.int32)


def _is_hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


_BLOCK_ROWS = 1 << 20


class _Column:
    """Batches of one column, copied into blocks of a million rows while values are plain.

    Large blocks rather than one small array per batch: ten thousand small arrays would
    scatter over the heap, and freeing them would not give the memory back.
    A batch numpy cannot take as it is switches the column to raw lists.
    """

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        self.blocks: list[np.ndarray] = []
        self.filled = 0  # rows used in the last block
        self.raw: list[Any] | None = None  # every value so far, once a batch was not plain

    def add(self, values: Sequence[Any], strict: bool) -> None:
        if self.raw is None:
            try:
                array: np.ndarray = np.array(values, self.dtype)
                if array.ndim != 1:  # values that are equal-length lists make a 2-D array
                    raise TypeError("not one number per entry")
            except (OverflowError, TypeError, ValueError):
                if strict:
                    raise UnplainValue("a numeric field holds a value that is not a plain number") from None
                self.raw = self._as_list()
                self.blocks = []
            else:
                self._append(array)
                return
        self.raw.extend(values)

    def _append(self, array: np.ndarray) -> None:
        start = 0
        while start < len(array):
            if not self.blocks or self.filled == len(self.blocks[-1]):
                self.blocks.append(np.empty(_BLOCK_ROWS, self.dtype))
                self.filled = 0
            block = self.blocks[-1]
            n = min(len(array) - start, len(block) - self.filled)
            block[self.filled:self.filled + n] = array[start:start + n]
            self.filled += n
            start += n

    def _as_list(self) -> list[Any]:
        out: list[Any] = []
        for i, block in enumerate(self.blocks):
            out.extend(block[: self.filled if i == len(self.blocks) - 1 else len(block)].tolist())
        return out

    def values(self) -> list[Any]:
        return self.raw if self.raw is not None else self._as_list()

    def concatenate(self) -> np.ndarray:
        if not self.blocks:
            return np.zeros(0, self.dtype)
        self.blocks[-1] = self.blocks[-1][: self.filled]
        out = np.concatenate(self.blocks) if len(self.blocks) > 1 else self.blocks[0].copy()
        self.blocks = []
        return out


class TraceBuilder:
    """Accumulates one device's trace from batches of entry dicts.

    ``strict`` is for the streaming decoder: it only accepts plain values (strings,
    numbers, frame lists of frame dicts) and raises :class:`UnplainValue` on anything
    else, so the caller can fall back to the tolerant plain path.
    """

    def __init__(self, tables: ModelTables, where: str, strict: bool = False) -> None:
        self.tables = tables
        self.where = where
        self.strict = strict
        self.count = 0
        self._action = _Column(np.int16)
        self._stack = _Column(np.int32)
        self._ctx = _Column(np.int32)
        self._meta = _Column(np.int32)
        self._ints = {name: _Column(np.int64) for _, _, name, _ in _INT_FIELDS}
        self._device_free = _Column(np.int64)
        self._fwd = _Column(np.int32)
        self._pool = _Column(np.int16)
        self._pool_ids: dict[tuple[int, ...], int] = {}
        self._time = _Column(np.float64)
        self._ctx_strings = _LocalStrings()
        self._meta_strings = _LocalStrings()
        # Keyed by any hashable action an entry names, not only the known strings.
        self._codes: dict[object, int] = {name: code for code, name in enumerate(tables.actions.names)}

    def add_batch(self, entries: list[Any]) -> None:
        if not entries:
            return
        if set(map(type, entries)) != {dict}:
            kind = next(type(e).__name__ for e in entries if type(e) is not dict)
            if self.strict:
                raise UnplainValue(f"a trace entry is a {kind}")
            raise SnapshotError(f"{self.where}: a trace entry is a {kind}, expected a dict")
        strict = self.strict
        if strict and any(map(dict.__contains__, entries, repeat(()))):
            raise UnplainValue("a trace entry has a key that is not a string")
        action: Sequence[Any]
        addr: Sequence[Any]
        size: Sequence[Any]
        stream: Sequence[Any]
        time_us: Sequence[Any]
        ctx: Sequence[Any]
        meta: Sequence[Any]
        try:
            # Entries torch writes have all these keys: one C-level pass takes them all.
            action, addr, size, stream, time_us, ctx, meta = zip(*map(_MAIN_FIELDS, entries))
        except KeyError:
            action = [e.get("action") for e in entries]
            addr, size, stream = ([e.get(key, default) for e in entries] for key, default, _, _ in _INT_FIELDS)
            time_us = [e.get("time_us") for e in entries]
            ctx = [e.get("compile_context", "") for e in entries]
            meta = [e.get("user_metadata", "") for e in entries]
        self._action._append(self._action_codes(action))
        self._stack._append(self._stacks_of(entries))
        for name, values in (("addr", addr), ("size", size), ("stream", stream)):
            self._ints[name].add(values, strict)
        self._time.add(time_us, strict)
        self._ctx._append(self._ctx_strings.column(ctx, strict))
        self._meta._append(self._meta_strings.column(meta, strict))
        if any(map(dict.__contains__, entries, repeat("device_free"))):
            self._device_free.add([e.get("device_free", NO_VALUE) for e in entries], strict)
        else:
            self._device_free._append(np.full(len(entries), NO_VALUE, np.int64))
        if any(map(dict.__contains__, entries, repeat("forward_frames"))):
            self._fwd._append(self._forward_of(entries))
        else:
            self._fwd._append(np.full(len(entries), -1, np.int32))
        if any(map(dict.__contains__, entries, repeat("pool_id"))):
            self._pool._append(np.asarray([self._pool_of(e.get("pool_id")) for e in entries], np.int16))
        else:
            self._pool._append(np.full(len(entries), -1, np.int16))
        self.count += len(entries)

    def _pool_of(self, value: object) -> int:
        """Index of an entry's ``pool_id`` (a pair of ints, as segments' segment_pool_id)."""
        if value is None:
            return -1
        if isinstance(value, list):
            value = tuple(value)
        if not (isinstance(value, tuple) and all(type(v) is int for v in value)):
            if self.strict:
                raise UnplainValue("pool_id is not a tuple of ints")
            return -1
        found = self._pool_ids.get(value)
        if found is None:
            if len(self._pool_ids) >= 32767:
                return -1  # more pools than any process makes: a broken file
            found = self._pool_ids[value] = len(self._pool_ids)
        return found

    def _forward_of(self, entries: list[Any]) -> np.ndarray:
        intern = self.tables.stacks.intern_forward
        if self.strict:
            for e in entries:
                lines = e.get("forward_frames")
                if lines is not None and (type(lines) is not list or any(type(x) is not str for x in lines)):
                    raise UnplainValue("forward_frames is not a list of strings")
        return np.asarray([intern(e.get("forward_frames")) for e in entries], np.int32)

    def _action_codes(self, action: Sequence[Any]) -> np.ndarray:
        codes = self._codes
        try:
            found = list(map(codes.get, action))
        except TypeError:  # an unhashable action: named by its repr, like any odd one
            found = [None] * len(action)
        if None in found:
            found = [codes[a] if type(a) is str and a in codes else self._new_code(a) for a in action]
        return np.array(found, np.int16)

    def _stacks_of(self, entries: list[Any]) -> np.ndarray:
        stacks = self.tables.stacks
        if self.strict:
            if any(map(dict.__contains__, entries, repeat("cpp_frames"))):
                raise UnplainValue("torch 2.0 layout (cpp_frames)")
            return np.asarray(stacks.intern_plain_batch(list(map(dict.get, entries, repeat("frames")))), np.int32)
        if any("cpp_frames" in e for e in entries):
            # torch 2.0 kept C++ frames apart; put them first, innermost first, like newer torch.
            return np.asarray([
                stacks.intern(list(e.get("cpp_frames") or []) + list(e.get("frames") or []))
                if "cpp_frames" in e else stacks.intern(e.get("frames"))
                for e in entries], np.int32)
        intern = stacks.intern
        return np.asarray([intern(e.get("frames")) for e in entries], np.int32)

    def _new_code(self, name: object) -> int:
        if self.strict and type(name) is not str:
            raise UnplainValue(f"an action is a {type(name).__name__}")
        code = self.tables.actions.code(name)
        try:
            self._codes[name] = code
        except TypeError:
            pass  # unhashable: looked up by its repr each time
        return code

    def finish(self) -> TraceColumns:
        warnings = self.tables.warnings
        ints = {}
        for _, default, name, wide in _INT_FIELDS:
            ints[name] = self._int_column(self._ints[name], name, warnings, default, wide)
        time_col = self._time
        time_us = float_column(time_col.values(), "time_us", warnings) if time_col.raw is not None \
            else time_col.concatenate()
        time_us[np.isinf(time_us)] = np.nan  # an infinite time is no time: NaN is the one spelling of that
        device_free = self._int_column(self._device_free, "device_free", warnings, NO_VALUE, False)
        ctx_ids = self._ctx_strings.to_global(self.tables.strings)
        meta_ids = self._meta_strings.to_global(self.tables.strings)
        return narrow(TraceColumns(
            action=self._action.concatenate(),
            addr=ints["addr"],
            size=ints["size"],
            stream=ints["stream"],
            time_us=time_us.astype(np.float64, copy=False),
            stack=self._stack.concatenate(),
            ctx=ctx_ids[self._ctx.concatenate()],
            meta=meta_ids[self._meta.concatenate()],
            device_free=device_free,
            fwd=self._fwd.concatenate(),
            pool=self._pool.concatenate(),
            pools=list(self._pool_ids),
        ))

    @staticmethod
    def _int_column(column: _Column, name: str, warnings: list[str], default: int, wide: bool) -> np.ndarray:
        if column.raw is not None:
            return int_column(column.values(), name, warnings, default, wide=wide)
        return column.concatenate()


def narrow(columns: TraceColumns) -> TraceColumns:
    """``columns`` with each of NARROW_COLUMNS as narrow as its values allow."""
    for name in NARROW_COLUMNS:
        setattr(columns, name, narrowest(getattr(columns, name)))
    return columns


def build_trace(entries: list[Any], tables: ModelTables, where: str) -> TraceColumns:
    """Columns of a whole list of entries (the plain path)."""
    builder = TraceBuilder(tables, where)
    builder.add_batch(entries)
    return builder.finish()
