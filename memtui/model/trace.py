"""One device's trace as numpy columns, built without keeping the entry dicts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.errors import SnapshotError
from memtui.model.actions import ActionTable
from memtui.model.columns import float_column, int_column
from memtui.model.frames import StackTable
from memtui.model.strings import StringTable

NO_VALUE = -1


@dataclass
class TraceColumns:
    """Column i describes trace entry i of this device."""

    action: np.ndarray  # int16 action code
    addr: np.ndarray
    size: np.ndarray
    stream: np.ndarray
    time_us: np.ndarray  # float64, NaN when the entry had no time
    stack: np.ndarray  # int32 stack id, -1 when the entry had no frames
    ctx: np.ndarray  # int32 string id of compile_context
    meta: np.ndarray  # int32 string id of user_metadata
    device_free: np.ndarray  # int64, -1 except on oom entries

    def __len__(self) -> int:
        return len(self.action)


def build_trace(
    entries: list, actions: ActionTable, stacks: StackTable, strings: StringTable, warnings: list[str], where: str
) -> TraceColumns:
    """Columns of ``entries``; one pass per column keeps each loop a tight comprehension."""
    for e in entries:
        if type(e) is not dict:
            raise SnapshotError(f"{where}: a trace entry is a {type(e).__name__}, expected a dict")
    n = len(entries)
    codes = {name: code for code, name in enumerate(actions.names)}
    raw_actions = [e.get("action") for e in entries]
    action = np.fromiter(
        (codes[a] if a in codes else _new_code(actions, codes, a) for a in raw_actions), np.int16, n
    )
    del raw_actions

    if any("cpp_frames" in e for e in entries):
        # torch 2.0 kept C++ frames apart; put them first, innermost first, like newer torch.
        stack = [stacks.intern(list(e.get("cpp_frames") or []) + list(e.get("frames") or [])) for e in entries]
    else:
        intern = stacks.intern
        stack = [intern(e.get("frames")) for e in entries]

    intern_string = strings.intern
    return TraceColumns(
        action=action,
        addr=int_column([e.get("addr", 0) for e in entries], "addr", warnings, wide=True),
        size=int_column([e.get("size", 0) for e in entries], "size", warnings),
        stream=int_column([e.get("stream", 0) for e in entries], "stream", warnings),
        time_us=float_column([e.get("time_us") for e in entries], "time_us", warnings),
        stack=np.asarray(stack, np.int32) if n else np.zeros(0, np.int32),
        ctx=np.fromiter((intern_string(e.get("compile_context", "")) for e in entries), np.int32, n),
        meta=np.fromiter((intern_string(e.get("user_metadata", "")) for e in entries), np.int32, n),
        device_free=int_column([e.get("device_free", NO_VALUE) for e in entries], "device_free", warnings, NO_VALUE),
    )


def _new_code(actions: ActionTable, codes: dict, name: object) -> int:
    code = actions.code(name)
    codes[name] = code
    return code
