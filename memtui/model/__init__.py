"""The indexed, columnar snapshot. Pure: never imports textual or torch.

A leaf: nothing here imports the loader (or anything else above it). The model is built
from the dicts and columns the loader produces, by :mod:`memtui.open`, which is the one
way to open a file.
"""

from __future__ import annotations

from memtui.model.snapshot import Annotation, DeviceModel, Match, Snapshot, build_model

__all__ = ["Annotation", "DeviceModel", "Match", "Snapshot", "build_model"]
