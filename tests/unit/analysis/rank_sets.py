"""Generated rank sets: small training-loop snapshots, one per rank, one of them made different."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.opened import GIB, MIB, frame, segment, write_snapshot

BASE = 0x7F0000000000
EXTRA_LINE = 77  # the call site only the different rank allocates from


def rank_snapshot(path: Path, rank: int, extra: int = 0, steps: int = 3) -> Path:
    """Parameters held throughout, an activation allocated and freed each step (a few KiB
    larger per rank, so no two files are alike) and, on the different rank, ``extra``
    bytes held from line 77."""
    trace = [{"action": "alloc", "addr": BASE, "size": 128 * MIB, "frames": [frame(10, "build_model")]}]
    blocks = [(0, 128 * MIB, "active_allocated")]
    if extra:
        trace.append({"action": "alloc", "addr": BASE + GIB, "size": extra, "frames": [frame(EXTRA_LINE, "stash")]})
        blocks.append((GIB, extra, "active_allocated"))
    for _ in range(steps):
        addr, size = BASE + 256 * MIB, 64 * MIB + rank * 4096
        trace += [{"action": "alloc", "addr": addr, "size": size, "frames": [frame(20, "forward")]},
                  {"action": "free_requested", "addr": addr, "size": size, "frames": [frame(21, "forward")]},
                  {"action": "free_completed", "addr": addr, "size": size, "frames": [frame(21, "forward")]}]
    return write_snapshot(path, [segment(BASE, 2 * GIB, blocks)], trace)


def rank_set(folder: Path, ranks: int = 6, different: int = 4, extra: int = 256 * MIB) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    return [str(rank_snapshot(folder / f"job.rank{r}.pickle", r, extra if r == different else 0))
            for r in range(ranks)]
