"""Training steps: a process-wide counter, markers in the snapshot, and step ranges.

``step()`` is called once per iteration, at its end. Steps are numbered from 0: before the
first call the script is in step 0, after the N-th call in step N. Each step is marked in
the recording twice, so a viewer can place it both ways:

- an ``external_annotations`` START/END pair named ``memtui.step#N`` spanning the step;
- ``user_metadata`` ``memtui.step#N`` on the trace entries the calling thread makes
  during it (where torch supports per-thread metadata).
"""

from __future__ import annotations

from collections.abc import Callable

from memtui.errors import UsageError
from memtui.record import backend

STEP_PREFIX = "memtui.step#"


def step_name(n: int) -> str:
    return f"{STEP_PREFIX}{n}"


def parse_steps(text: str) -> tuple[int, int | None]:
    """``'A:B'`` -> ``(A, B)``: steps A to B-1, like a Python slice. ``'A:'`` runs to the end,
    ``':B'`` starts at 0, and a single ``'N'`` means step N alone."""
    raw = text.strip()
    try:
        if ":" not in raw:
            start = int(raw)
            end: int | None = start + 1
        else:
            left, _, right = raw.partition(":")
            start = int(left) if left.strip() else 0
            end = int(right) if right.strip() else None
    except ValueError:
        raise UsageError(f"--steps {text!r}: expected A:B with whole numbers, e.g. 5:8 (steps 5, 6 and 7)") from None
    if start < 0 or (end is not None and end < 0):
        raise UsageError(f"--steps {text!r}: step numbers start at 0")
    if end is not None and end <= start:
        raise UsageError(f"--steps {text!r}: the end must be after the start (A:B records steps A to B-1)")
    return start, end


class _Counter:
    """Process-wide step state. One training loop per process is the norm, so one counter."""

    def __init__(self) -> None:
        self.count = 0
        self.scope = None  # the open record_function of the current step, if any
        self.listeners: list[Callable[[int], None]] = []


_counter = _Counter()


def current_step() -> int:
    """The step the process is in: how many times ``step()`` has been called."""
    return _counter.count


def step() -> int:
    """Mark the end of the current step and the start of the next; returns the new step number.

    Step ranges (``Stepper``, ``memtui run --steps``) start and stop recording here, between
    the old step's END marker and the new step's START, so a range's file holds whole steps.
    """
    torch = backend.torch_module()
    _close_marker()
    _counter.count += 1
    for listener in list(_counter.listeners):
        listener(_counter.count)
    if _counter.scope is None:  # a listener that started a recording has opened it already
        _open_marker(torch)
    return _counter.count


def reopen_marker(start: Callable[[], None]) -> None:
    """Run ``start`` (which turns recording on) between closing and reopening the step marker.

    The marker of a step that began before recording did would otherwise leave an END with
    no START in the file; reopening it gives the partial step a proper pair.
    """
    _close_marker()
    start()
    _open_marker(backend.torch_module())


def add_listener(listener: Callable[[int], None]) -> None:
    _counter.listeners.append(listener)


def remove_listener(listener: Callable[[int], None]) -> None:
    if listener in _counter.listeners:
        _counter.listeners.remove(listener)


def _open_marker(torch) -> None:
    name = step_name(_counter.count)
    backend.set_step_metadata(torch, name, STEP_PREFIX)
    _counter.scope = backend.open_scope(torch, name)


def _close_marker() -> None:
    scope, _counter.scope = _counter.scope, None
    if scope is not None:
        backend.close_scope(scope)
