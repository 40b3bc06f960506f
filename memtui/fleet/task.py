"""The work one worker does for one rank file, wherever it runs.

It must be importable by name on every worker (Dask pickles functions by reference),
take and return only plain values, and never raise for a bad file: the summary says
what went wrong instead.
"""

from __future__ import annotations

import os

from memtui.analysis.ranks import SUMMARY_VERSION, rank_from_name, summarize_snapshot
from memtui.cache.summaries import summary_key
from memtui.errors import MemtuiError
from memtui.open import open_snapshot


def keyed_summary(path: str, depth: int = 1) -> tuple[str | None, dict]:
    """(cache key, summary) of one rank file.

    The key is taken by the worker, before it reads the file, so the summary is stored
    under the content it was computed from even if the file changes in between.
    """
    try:
        key = summary_key(path, depth)
    except OSError:
        key = None  # unreadable: rank_summary says why
    # No model cache: a fleet of ranks would evict every model the user does open.
    return key, rank_summary(path, depth, cache=None)


def rank_summary(path: str, depth: int = 1, **open_options) -> dict:
    """Open one rank's snapshot and summarise it; failures come back as ``{"error": ...}``.

    ``open_options`` go to :func:`open_snapshot` (``cache=None``: summarising thousands of
    ranks should not fill the model cache with models nobody opens)."""
    path = os.fspath(path)
    base = {"version": SUMMARY_VERSION, "file": path, "rank": rank_from_name(path)}
    try:
        stat = os.stat(path)
        base.update(file_size=stat.st_size, mtime=stat.st_mtime)
        snapshot = open_snapshot(path, **open_options)
    except MemtuiError as exc:
        return {**base, "error": exc.message}
    except OSError as exc:
        return {**base, "error": f"{path}: {exc.strerror or exc}"}
    return {**base, **summarize_snapshot(snapshot, depth), "error": None}
