"""Summaries computed on a Dask cluster; the only module of memtui that imports Dask.

``tcp://host:8786`` (or any address ``distributed.Client`` takes) connects to a running
scheduler whose workers see the same file system as this machine; ``local:N`` starts a
``LocalCluster`` of N single-threaded worker processes here. Each file is one task that
returns its key and summary: the snapshots are read where the work runs and only
kilobytes travel back.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Sequence

from memtui.errors import MemtuiError, MissingDependencyError, UsageError
from memtui.fleet.runners import Outcome, start_resource_tracker

INSTALL_HINT = "pip install 'memtui[cluster]'"
LOCAL_PREFIX = "local:"
CONNECT_TIMEOUT_S = 10


def require_distributed() -> None:
    """Fail at once, with what to install, when Dask is missing (without importing it: that
    takes a second or two, and a run whose summaries are all cached never needs it)."""
    try:
        found = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingDependencyError(f"--cluster needs Dask, which is not installed: {INSTALL_HINT}")


def import_distributed():
    require_distributed()
    try:
        import distributed
    except ImportError as exc:
        raise MissingDependencyError(f"--cluster needs Dask, which failed to import ({exc}): {INSTALL_HINT}") from None
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
    """Tasks on a Dask cluster; one task per file, as many at once as the cluster has threads.

    The address is checked at once, but the cluster is reached (or started) only when the
    first file needs a summary: a run that finds every summary cached starts nothing.
    """

    def __init__(self, address: str) -> None:
        require_distributed()
        self.address = address
        self._local = local_worker_count(address)
        if self._local is not None:
            self.description = f"a local Dask cluster of {self._local} worker processes"
        else:
            self.description = f"the Dask cluster at {address}"
        self._distributed = None
        self._client = self._cluster = None
        self.workers = self._local or 1
        self.scheduler_address: str | None = None

    def connect(self) -> None:
        if self._client is not None:
            return
        distributed = self._distributed = import_distributed()
        if self._local is not None:
            # One thread per worker process: a summary holds the whole decoded snapshot in
            # memory (several times the file's size), and decoding holds the GIL anyway.
            start_resource_tracker()
            try:
                self._cluster = distributed.LocalCluster(n_workers=self._local, threads_per_worker=1,
                                                         processes=True, dashboard_address=None,
                                                         silence_logs=logging.ERROR)
            except Exception as exc:  # e.g. worker processes that cannot start: one line, not a traceback
                raise MemtuiError(f"cannot start {self.description} ({exc})") from None
            self._client = distributed.Client(self._cluster)
        else:
            try:
                self._client = distributed.Client(self.address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as exc:
                raise UsageError(f"cannot reach the Dask scheduler at {self.address} ({exc})") from None
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
        self.connect()
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
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
