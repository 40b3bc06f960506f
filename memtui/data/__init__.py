"""Package data: the small real snapshot that ``memtui --demo`` opens."""

from __future__ import annotations

import os

DEMO_FILE = "demo_snapshot.pickle.xz"


def demo_snapshot_path() -> str:
    """Path of the bundled demo snapshot (works from an installed wheel)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), DEMO_FILE)
