"""The explorer's first view of a snapshot: the device it opens on, its curves from the
cache where an earlier open kept them."""

from __future__ import annotations

import os

from memtui.cache import ModelCache
from memtui.cache.curves import load_curves, store_curves_later
from memtui.model import Snapshot
from memtui.tui.views.device_view import DeviceView, build_device_view


def prepare_view(snapshot: Snapshot, device: int | None, cache: ModelCache | None,
                 source: str | os.PathLike | None) -> DeviceView:
    """The view of the device the explorer opens on (``device``, else the default), with its
    curves from the cache where they were kept (see :func:`keep_curves`)."""
    d = snapshot.device_or_default(device)
    model = snapshot.devices[d]
    view = build_device_view(snapshot, d, load_curves(cache, source, model.device, len(model.trace)))
    if cache is not None and source is not None:
        view.kept_with = (cache, source)
    return view


def keep_curves(cache: ModelCache | None, source: str | os.PathLike | None, view: DeviceView) -> None:
    """Keep ``view``'s curves for the next open unless they are kept already; written when
    the cache's writes are released (the explorer releases them after its first screen)."""
    store_curves_later(cache, source, view.device.device, view.allocated, view.reserved)
