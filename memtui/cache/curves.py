"""The explorer's memory curves, kept beside the model cache.

On a warm open the model is mapped in a fraction of a second; the allocated and reserved
curves over every event are then the largest thing the explorer would compute before its
first screen (about half a second at 10M events, most of it touching arrays of 80 MB).
They are a function of the model alone, so they are kept beside its cache entry, one
``.npy`` file per device, mapped on the next open and written once the first screen is
drawn, atomically, as the model's own entry is. The file is one int64 array: the allocated
curve, the reserved curve, then each curve's least and greatest value per block of events
(memtui/analysis/curve_extremes.py: the timeline's columns and the peaks are read from them,
so a warm open passes over neither curve).
"""

from __future__ import annotations

import os

import numpy as np

from memtui import __version__, logs
from memtui.analysis.curve_extremes import CurveExtremes, block_count
from memtui.atomic import atomic_write, remove_quietly
from memtui.cache.store import ModelCache, beside_entry

# Part of the file name, with memtui's version: a change to how the curves are computed gives
# new names, and the old files are never read (they go when their model's entry is pruned).
# 2: the blocks' extremes follow the curves (a file whose length does not fit is not read).
CURVES_VERSION = 2


def _name(device: int) -> str:
    return f"curves{CURVES_VERSION}-{__version__}.d{device}.npy"


def curves_path(cache: ModelCache, source: str | os.PathLike, device: int) -> str:
    """Where the curves of ``device`` of ``source`` are kept (raises OSError if ``source``
    cannot be read)."""
    return os.path.join(cache.folder, f"{cache.key(source)}.{_name(device)}")


def load_curves(cache: ModelCache | None, source, device: int,
                n_events: int) -> tuple[CurveExtremes, CurveExtremes] | None:
    """The allocated and reserved curves as kept for ``device`` of ``source``, with their
    blocks' extremes (all mapped, read-only), or None: no cache, none kept, or a file that
    is not the curves of ``n_events`` (then removed)."""
    path = beside_entry(cache, source, _name(device))
    if path is None or not os.path.exists(path):
        return None
    blocks = block_count(n_events)
    try:
        kept = np.load(path, mmap_mode="r", allow_pickle=False)
        if kept.dtype != np.int64 or kept.shape != (2 * n_events + 4 * blocks,):
            raise ValueError(f"{kept.dtype} {kept.shape}, not the curves of {n_events} events")
    except Exception as exc:  # noqa: BLE001 - any file that is not the curves is computed again
        logs.info(logs.CACHE, "curves for %s not read (%s); computed again", source, exc)
        remove_quietly(path)  # so the next write puts the right ones there
        return None
    allocated, reserved = kept[:n_events], kept[n_events:2 * n_events]
    a_lows, a_highs, r_lows, r_highs = kept[2 * n_events:].reshape(4, blocks)
    return CurveExtremes(allocated, a_lows, a_highs), CurveExtremes(reserved, r_lows, r_highs)


def store_curves_later(cache: ModelCache | None, source, device: int, allocated: CurveExtremes,
                       reserved: CurveExtremes) -> None:
    """Keep the curves of ``device`` of ``source`` and their extremes for the next open, in a
    background writer held back like the model's writes (until the first screen is drawn)."""
    if isinstance(allocated.curve, np.memmap) or not len(allocated.curve):
        return  # read from where they are kept (a slice of the mapped file): no need to hash the snapshot's ends again
    path = beside_entry(cache, source, _name(device))
    if cache is None or path is None or os.path.exists(path):
        return  # no cache, or kept already
    cache.write_later(lambda: _write(cache, path, allocated, reserved))


def _write(cache: ModelCache, path: str, allocated: CurveExtremes, reserved: CurveExtremes) -> None:
    if not cache.check_writable():
        return
    parts = (allocated.curve, reserved.curve, allocated.lows, allocated.highs, reserved.lows, reserved.highs)
    header = {"descr": np.dtype(np.int64).str, "fortran_order": False, "shape": (sum(len(p) for p in parts),)}
    with atomic_write(path, force=True) as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        for part in parts:  # written as they are: no copy of the whole
            fh.write(memoryview(np.ascontiguousarray(part, dtype=np.int64)))
