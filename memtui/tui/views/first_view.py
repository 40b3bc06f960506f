"""The explorer's first view of a snapshot: the device it opens on, its curves from the
cache where an earlier open kept them."""

from __future__ import annotations

import os
from collections.abc import Callable

from memtui.cache.curves import load_curves, store_curves_later
from memtui.cache.store import ModelCache
from memtui.load.source import ProgressFn
from memtui.model import Snapshot
from memtui.open import open_snapshot
from memtui.tui.views.device_view import DeviceView, build_device_view

Loader = Callable[[ProgressFn], Snapshot]


def open_first_view(source: str | os.PathLike | Loader, device: int | None, cache: ModelCache | None,
                    progress: ProgressFn) -> tuple[Snapshot, DeviceView]:
    """The snapshot (a path, opened through the model ``cache``, or ``loader(progress)``) and
    the view the explorer opens on, its curves kept for the next open: everything the first
    screen needs, made off the thread that draws it (the loading screen's worker, or the open
    begun before the app, memtui/tui/early_load.py)."""
    path = None if callable(source) else source
    snapshot = source(progress) if callable(source) else open_snapshot(source, progress, cache=cache)
    progress("preparing", 0, 1)
    view = prepare_view(snapshot, device, cache, path)
    keep_curves(cache, path, view)
    return snapshot, view


def prepare_view(snapshot: Snapshot, device: int | None, cache: ModelCache | None,
                 source: str | os.PathLike | None) -> DeviceView:
    """The view of the device the explorer opens on (``device``, else the default), with its
    curves from the cache where they were kept (see :func:`keep_curves`)."""
    d = snapshot.device_or_default(device)
    model = snapshot.devices[d]
    view = build_device_view(snapshot, d, load_curves(cache, source, model.device, len(model.trace)))
    if cache is not None and source is not None:
        view.kept_with = (cache, source)
    # The first screen shows the curves and their peaks: the passes over each curve, made here.
    view.allocated_extremes, view.reserved_extremes  # noqa: B018
    return view


def keep_curves(cache: ModelCache | None, source: str | os.PathLike | None, view: DeviceView) -> None:
    """Keep ``view``'s curves for the next open unless they are kept already; written when
    the cache's writes are released (the explorer releases them after its first screen)."""
    store_curves_later(cache, source, view.device.device, view.allocated_extremes, view.reserved_extremes)
