"""The explorer's model of a live state: the same build as for a file."""

from __future__ import annotations

from memtui.load.normalize import normalize
from memtui.model import Snapshot, build_model


def build_live_model(raw: dict, name: str) -> Snapshot:
    """Normalize and index ``raw`` (a ``_snapshot()``-shaped dict, consumed) as a file would be."""
    return build_model(normalize(raw, name), name, 0)
