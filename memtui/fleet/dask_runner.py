"""Summaries computed on a Dask cluster; the only module of memtui that imports Dask.

``tcp://host:8786`` (or any address ``distributed.Client`` takes) connects to a running
scheduler whose workers see the same file system as this machine; ``local:N`` starts a
``LocalCluster`` of N single-threaded worker processes here. Each file is one task that
returns its key and summary: the snapshots are read where the work runs and only
kilobytes travel back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from memtui.errors import MemtuiError, MissingDependencyError, UsageError
from memtui.fleet.runners import Outcome

INSTALL_HINT = "pip install 'memtui[cluster]'"
LOCAL_PREFIX = "local:"
CONNECT_TIMEOUT_S = 10


def import_distributed():
    try:
        import distributed
    except ImportError:
        raise MissingDependencyError(f"--cluster needs Dask, which is not installed: {INSTALL_HINT}") from None
    return distributed


def memtui_versions() -> tuple[str, int]:
    """Run on each worker: the memtui it imports (summaries must be computed alike)."""
    from memtui import __version__
    from memtui.analysis.ranks import SUMMARY_VERSION

    return __version__, SUMMARY_VERSION


def local_worker_count(address: str) -> int | None:
    """N of ``local:N``; None for the address of a scheduler."""
    if not address.startswith(LOCAL_PREFIX):
        return None
    text = address[len(LOCAL_PREFIX):]
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--cluster {address}: say how many local workers, like local:4")
    return int(text)


class DaskRunner:
    """Tasks on a Dask cluster; one task per file, as many at once as the cluster has threads."""

    def __init__(self, address: str) -> None:
        distributed = import_distributed()
        self._distributed = distributed
        self._cluster = None
        local = local_worker_count(address)
        if local is not None:
            # One thread per worker process: a summary holds the whole decoded snapshot in
            # memory (several times the file's size), and decoding holds the GIL anyway.
            try:
                self._cluster = distributed.LocalCluster(n_workers=local, threads_per_worker=1, processes=True,
                                                         dashboard_address=None, silence_logs=logging.ERROR)
            except Exception as exc:  # e.g. worker processes that cannot start: one line, not a traceback
                raise MemtuiError(f"cannot start a local Dask cluster of {local} workers ({exc})") from None
            self._client = distributed.Client(self._cluster)
            self.description = f"a local Dask cluster of {local} worker processes"
        else:
            try:
                self._client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as exc:
                raise UsageError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
            self.description = f"the Dask cluster at {address}"
        try:
            self._check_workers()
        except BaseException:
            self.close()
            raise
        self.workers = max(1, sum(self._client.nthreads().values()))
        self.scheduler_address = self._client.scheduler.address

    def _check_workers(self) -> None:
        try:
            # Sent by module and name, so this also tells whether the workers can import memtui.
            seen = self._client.run(memtui_versions)
        except Exception as exc:  # typically: No module named 'memtui' on the workers
            raise UsageError(f"{self.description}: the workers cannot run memtui ({type(exc).__name__}: {exc}); "
                             "install the same memtui on them") from None
        if not seen:
            raise UsageError(f"{self.description} has no workers")
        mine = memtui_versions()
        other = sorted({tuple(v) for v in seen.values()} - {mine})
        if other:
            raise UsageError(f"{self.description}: workers run memtui {other[0][0]}, this is {mine[0]}; "
                             "install the same version on them")

    def map_unordered(self, fn: Callable, items: Sequence) -> Outcome:
        futures = self._client.map(fn, list(items), pure=False)
        position = {future.key: i for i, future in enumerate(futures)}
        try:
            for future in self._distributed.as_completed(futures):
                try:
                    yield position[future.key], future.result()
                except Exception as exc:  # the task raised, or its worker died more than Dask retries
                    yield position[future.key], exc
                future.release()  # the scheduler may forget the result once we have it
        finally:
            self._client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        client, cluster = getattr(self, "_client", None), self._cluster
        self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
