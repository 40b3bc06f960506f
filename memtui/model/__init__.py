"""The indexed, columnar snapshot. Pure: never imports textual or torch.

A leaf: nothing here imports the loader (or anything else above it). The model is built
from the dicts and columns the loader produces, by :mod:`memtui.open`, which is the one
way to open a file.

The names below are imported when first asked for: the command line reads a few small
modules of the model (memtui.model.actions) before numpy is imported, and this package is
imported on the way to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memtui.model.snapshot import Annotation, DeviceModel, Match, Snapshot, build_model

__all__ = ["Annotation", "DeviceModel", "Match", "Snapshot", "build_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from memtui.model import snapshot

        return getattr(snapshot, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
