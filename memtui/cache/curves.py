"""The explorer's memory curves, kept beside the model cache.

On a warm open the model is mapped in a fraction of a second; the allocated and reserved
curves over every event are then the largest thing the explorer would compute before its
first screen (about half a second at 10M events, most of it touching arrays of 80 MB).
They are a function of the model alone, so they are kept beside its cache entry, one
``.npy`` file per device (both curves, int64, shape 2 x events), mapped on the next open
and written once the first screen is drawn, atomically, as the model's own entry is.
"""

from __future__ import annotations

import os

import numpy as np

from memtui import __version__, logs
from memtui.atomic import atomic_write, remove_quietly
from memtui.cache.store import ModelCache, beside_entry

# Part of the file name, with memtui's version: a change to how the curves are computed gives
# new names, and the old files are never read (they go when their model's entry is pruned).
CURVES_VERSION = 1


def _name(device: int) -> str:
    return f"curves{CURVES_VERSION}-{__version__}.d{device}.npy"


def curves_path(cache: ModelCache, source: str | os.PathLike, device: int) -> str:
    """Where the curves of ``device`` of ``source`` are kept (raises OSError if ``source``
    cannot be read)."""
    return os.path.join(cache.folder, f"{cache.key(source)}.{_name(device)}")


def load_curves(cache: ModelCache | None, source, device: int, n_events: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(allocated, reserved) as kept for ``device`` of ``source`` (mapped, read-only), or None:
    no cache, none kept, or a file that is not two curves of ``n_events`` (then removed)."""
    path = beside_entry(cache, source, _name(device))
    if path is None or not os.path.exists(path):
        return None
    try:
        curves = np.load(path, mmap_mode="r", allow_pickle=False)
        if curves.dtype != np.int64 or curves.shape != (2, n_events):
            raise ValueError(f"{curves.dtype} {curves.shape}, not two curves of {n_events} events")
    except Exception as exc:  # noqa: BLE001 - any file that is not the curves is computed again
        logs.info(logs.CACHE, "curves for %s not read (%s); computed again", source, exc)
        remove_quietly(path)  # so the next write puts the right ones there
        return None
    return curves[0], curves[1]


def store_curves_later(cache: ModelCache | None, source, device: int, allocated: np.ndarray,
                       reserved: np.ndarray) -> None:
    """Keep the curves of ``device`` of ``source`` for the next open, in a background writer
    held back like the model's writes (until the first screen is drawn)."""
    if isinstance(allocated, np.memmap) or not len(allocated):
        return  # read from where they are kept: no need to hash the snapshot's ends again for the path
    path = beside_entry(cache, source, _name(device))
    if cache is None or path is None or os.path.exists(path):
        return  # no cache, or kept already
    cache.write_later(lambda: _write(cache, path, allocated, reserved))


def _write(cache: ModelCache, path: str, allocated: np.ndarray, reserved: np.ndarray) -> None:
    if not cache.check_writable():
        return
    header = {"descr": np.dtype(np.int64).str, "fortran_order": False, "shape": (2, len(allocated))}
    with atomic_write(path, force=True) as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        for curve in (allocated, reserved):  # written as they are: no 2 x events copy
            fh.write(memoryview(np.ascontiguousarray(curve, dtype=np.int64)))
