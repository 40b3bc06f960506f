"""The checks of a kept model, started before numpy and the command are imported.

A warm open reads its model from the cache, and every byte of the cache file is checked
before any is used (memtui/cache/file_check.py): at ten million events 390 MB, 0.15 s of a
core's time. The checks need no numpy. Where the command line finds a model of the snapshot
it names already kept, it starts them here, on a thread of its own, to run while the imports
take one core (memtui/cli.py); the read that follows (fileformat.read_cache_file) takes the
checked file instead of checking it again.

It is only a head start, as the scan started for a cold open is (memtui/load/ahead.py): the
read takes the result only for the very file it reads (same device, inode, size, modification
and change times as when it was checked) and only from checks that passed; anything else
(a file replaced since, a check that failed, a guess at the wrong entry) leaves the read to
check the file by itself, with the same outcome.

This module imports nothing heavy; the checks' modules are imported as they start.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtui.cache.file_check import CheckedFile


class _Check:
    """The checks of one cache file on a thread of its own; ``result`` is the checked file,
    or None when they failed."""

    def __init__(self, path: str) -> None:
        # Imported here, on the thread that imports everything else: two threads importing
        # modules that import each other can deadlock, which Python breaks with an error.
        from memtui.cache.file_check import check_file
        from memtui.cores import spare_cores

        self.path = path
        self.result: CheckedFile | None = None
        self.done = threading.Event()
        self._check_file = check_file
        self._cores = spare_cores()  # a core is left to the imports: the answer waits for them
        self._thread = threading.Thread(target=self._run, name="memtui-check-ahead", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._check_file(self.path, cores=self._cores)
        except Exception:  # noqa: BLE001 - the read checks the file again and says what is wrong
            self.result = None
        finally:
            self.done.set()


_started: _Check | None = None
_lock = threading.Lock()


def start(path: str) -> None:
    """Start checking the cache file at ``path`` on a thread (once per process)."""
    global _started
    with _lock:
        if _started is not None:
            return
        check = _Check(os.path.abspath(path))
        check.start()  # (a thread that cannot start raises, and no check is kept)
        _started = check


def take(path: str) -> CheckedFile | None:
    """The checked file at ``path`` if its checks were started here and passed and it is
    still the file they checked; else None (and the read checks it by itself). Waits for
    checks still running."""
    global _started
    with _lock:
        check = _started
        if check is None or check.path != os.path.abspath(path):
            return None
        _started = None
    check.done.wait()
    checked, check.result = check.result, None
    if checked is None:
        return None
    from memtui.cache.file_check import identity

    try:
        now = identity(os.stat(path))
    except OSError:
        return None
    return checked if now == checked.identity else None


def discard() -> None:
    """Forget checks nobody took (the command read otherwise, or ended first); a check still
    running ends on its own thread, a daemon's."""
    global _started
    with _lock:
        _started = None
