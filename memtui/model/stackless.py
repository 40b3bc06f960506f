"""What is known about an event recorded without a stack.

With ``stacks="python"`` torch records the Python stack of the thread that allocates. The
autograd engine runs backward on threads of its own, with no Python frames, so every
allocation and free of the backward pass has an empty stack. The main thread is then
blocked inside ``loss.backward()``, and the last event it recorded (torch's own
``_make_grads``, under that call) shows the line that started the pass. Other empty
stacks come from recordings that keep none for some events (``context=None``, or
``context="alloc"`` for frees) or from other threads without Python (C++ workers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from memtui.model import actions as act
from memtui.model.lifetimes import NONE

if TYPE_CHECKING:
    from memtui.model.frames import StackTable
    from memtui.model.trace import TraceColumns


# What this module reads of a Snapshot and its DeviceModel, as protocols: snapshot.py
# imports this module, so naming those classes here would be an import cycle.
class _Device(Protocol):
    @property
    def trace(self) -> TraceColumns: ...

    @property
    def actions_with_stacks(self) -> frozenset[int]: ...


class _Recording(Protocol):
    @property
    def devices(self) -> Sequence[_Device]: ...

    @property
    def stacks(self) -> StackTable: ...

# Python frames inside torch that are on the main thread's stack while backward runs.
_BACKWARD_ENTRIES = {
    ("torch/_tensor.py", "backward"),
    ("torch/autograd/__init__.py", "backward"),
    ("torch/autograd/__init__.py", "grad"),
    ("torch/autograd/graph.py", "_engine_run_backward"),
}


_FREES = frozenset((act.FREE_REQUESTED, act.FREE_COMPLETED, act.FREE))


@dataclass(frozen=True)
class StacklessContext:
    """Why an event has no stack, and the nearest earlier event that has one."""

    note: str  # one sentence for an inspector or a stack listing
    short: str  # a few words for a table column
    event: int  # the nearest earlier event with a stack, or NONE
    in_backward: bool  # that event was the main thread entering backward()


def stackless_context(snapshot: _Recording, device: int, i: int) -> StacklessContext | None:
    """The context of event ``i`` when it has no stack (None when it has one, or for
    entries that never carry one, such as ``snapshot``)."""
    dev = snapshot.devices[device]
    stack = dev.trace.stack
    if stack[i] >= 0 or int(dev.trace.action[i]) == act.SNAPSHOT:
        return None
    action = int(dev.trace.action[i])
    if not dev.actions_with_stacks:
        return StacklessContext("this recording has no stacks (recorded with context=None or stacks off)",
                                "", NONE, False)
    if action in _FREES and not dev.actions_with_stacks & _FREES:
        return StacklessContext("this recording keeps no stacks for frees (context='alloc' records stacks at "
                                "allocation only)", "", NONE, False)
    before = nearest_stacked_before(stack, i)
    if before == NONE:
        return StacklessContext("no stack: recorded on a thread without Python frames, before any event with a "
                                "stack", "", NONE, False)
    stacks = snapshot.stacks
    label = stacks.frames.label_text(int(stacks.label[int(stack[before])]), short=True)
    if _in_backward(stacks, int(stack[before])):
        return StacklessContext(
            f"no stack: made on the autograd engine's thread, during backward() called at {label}",
            f"(backward) {label}", before, True)
    return StacklessContext(
        f"no stack: recorded on a thread without Python frames (the autograd engine or a C++ worker); "
        f"the last event with a stack before it is {before:,} at {label}", "", before, False)


def last_stacked_before(stack: np.ndarray) -> np.ndarray:
    """For each event, the index of the nearest earlier event (itself excluded) with a stack, or NONE."""
    n = len(stack)
    marks = np.where(stack >= 0, np.arange(n, dtype=np.int64), -1)
    running = np.maximum.accumulate(marks) if n else marks
    out = np.full(n, NONE, np.int64)
    out[1:] = running[:-1]
    out[out < 0] = NONE
    return out


def nearest_stacked_before(stack: np.ndarray, i: int) -> int:
    """``last_stacked_before(stack)[i]`` for one event, looking back only as far as it must:
    the explorer asks for the event under the cursor, and the whole array at ten million
    events took a second on the first key that landed on an event without a stack."""
    end, width = i, 256
    while end > 0:
        begin = max(0, end - width)
        found = np.flatnonzero(stack[begin:end] >= 0)
        if len(found):
            return begin + int(found[-1])
        end, width = begin, width * 4
    return NONE


def _in_backward(stacks: StackTable, sid: int) -> bool:
    frames = stacks.frames
    for fid in stacks.frame_ids(sid):
        path = frames.filename_of(int(fid)).replace("\\", "/")
        name = frames.name_of(int(fid))
        if any(path.endswith(tail) and name == fn for tail, fn in _BACKWARD_ENTRIES):
            return True
    return False
