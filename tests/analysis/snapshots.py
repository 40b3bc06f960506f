"""Helpers for the analysis tests: cached opening of real files and hand-made snapshots."""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

from memtui.model import Snapshot
from memtui.open import open_snapshot
from tests.conftest import SHARED

MIB = 1 << 20
GIB = 1 << 30


@functools.cache
def cached(path: str) -> Snapshot:
    """Open each file once per test session: the analyses never modify a snapshot."""
    return open_snapshot(path)


def shared(name: str) -> Snapshot:
    """A real snapshot from ../shared/snapshots (skips when absent)."""
    import pytest

    path = SHARED / f"{name}.pickle"
    if not path.exists():
        pytest.skip(f"snapshot not available: {path}")
    return cached(str(path))


def frame(line: int, name: str = "train_step", filename: str = "/home/u/train.py") -> dict:
    return {"filename": filename, "line": line, "name": name}


def write_snapshot(path: Path, segments: list[dict], trace: list[dict], annotations: list | None = None) -> Path:
    """A minimal snapshot file as torch writes it, one device."""
    t = 1_000_000
    for entry in trace:
        t += 10
        entry.setdefault("time_us", t)
        entry.setdefault("stream", 0)
        entry.setdefault("compile_context", "N/A")
        entry.setdefault("user_metadata", "")
    raw = {"segments": segments, "device_traces": [trace], "allocator_settings": {},
           "external_annotations": annotations or []}
    path.write_bytes(pickle.dumps(raw, protocol=4))
    return path


def segment(address: int, total: int, blocks: list[tuple[int, int, str]], kind: str = "large") -> dict:
    """A segment with blocks given as (offset, size, state)."""
    return {"device": 0, "address": address, "total_size": total, "stream": 0, "segment_type": kind,
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "allocated_size": sum(s for _, s, st in blocks if st == "active_allocated"),
            "active_size": sum(s for _, s, st in blocks if st != "inactive"),
            "requested_size": sum(s for _, s, st in blocks if st != "inactive"),
            "blocks": [{"address": address + o, "size": s, "requested_size": s, "state": st,
                        "frames": [frame(10)] if st != "inactive" else []} for o, s, st in blocks]}
