"""Options several analyses share, declared once so they read and bound the same everywhere."""

from __future__ import annotations

from typing import Any

from memtui.errors import UsageError
from memtui.model import DeviceModel, Snapshot
from memtui.model.snapshot import NOT_REPLAYED
from memtui.services.options import option

MAX_ROWS = 1000  # the most call sites, allocations or rows an analysis is asked to list
DEFAULT_DEVICE = "the device with an OOM, else the one with the most events, else the most reserved"


def device_option(help: str = f"device (default: {DEFAULT_DEVICE})") -> Any:
    return option(None, help, optional=True)


def depth_option() -> Any:
    return option(1, "user (Python) frames that make a call site (default 1: the deepest user frame, the line "
                     "that allocated)", low=1, high=100)


def top_option(default: int, help: str) -> Any:
    return option(default, help, low=0, high=MAX_ROWS)


def device_index(snapshot: Snapshot, device: int | None) -> int:
    """The device an analysis looks at: the one asked for, else the snapshot's default
    (the explorer's rule, :meth:`Snapshot.default_device`)."""
    return snapshot.device_or_default(device)


def over_time(dev: DeviceModel, what: str) -> DeviceModel:
    """``dev`` for an analysis of its trace over time (``what``), refused in one line for a
    filtered export, whose trace is not replayed (:data:`memtui.model.snapshot.NOT_REPLAYED`)."""
    if dev.partial_trace:
        raise UsageError(f"{what}: {NOT_REPLAYED}; run it on the source snapshot")
    return dev


def model_notes(snapshot: Snapshot, shown_path: str, replaced: bool = True) -> list[str]:
    """What every front end says of a model before its answers: the open's own notice, and,
    where the model replaced values it could not use (``replaced``: unless the caller lists
    them itself), that figures may rest on them and which command lists them."""
    notes = [snapshot.load_notice] if snapshot.load_notice else []
    if replaced and snapshot.replaced_values_note:
        notes.append(f"{snapshot.replaced_values_note}: figures may rest on them; memtui check {shown_path} lists them")
    return notes
