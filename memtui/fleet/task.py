"""The work one worker does for one rank file, wherever it runs.

It must be importable by name on every worker (Dask pickles functions by reference),
take and return only plain values, and never raise for a bad file: the summary says
what went wrong instead.
"""

from __future__ import annotations

from memtui.analysis.ranks import rank_summary
from memtui.cache.summaries import summary_key


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
