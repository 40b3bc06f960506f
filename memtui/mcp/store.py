"""The snapshots a server has opened, and the folders it may open them from.

A model stays in memory between tool calls, keyed by the file's resolved path, size and
modification time, so ten questions about one large file pay its load once (and a file
rewritten in between is loaded again). Below that sits memtui's on-disk model cache, so a
restarted server maps the columns instead of decoding the file again.

Only regular files under the allowed roots are opened: a path is resolved (symlinks
included) before it is checked, so a link inside a root pointing outside it is refused.

Analyses are remembered per model (:meth:`SnapshotStore.computed`), so asking again, or for
the next page, does not run them again; they go when their model goes. A load that fails
(a refused or damaged file) hands the memory it took back to the system before the error
is answered.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from memtui.errors import UsageError
from memtui.model import Snapshot
from memtui.open import ModelStore, open_snapshot

KEEP_MODELS = 4  # models held in memory; the least recently used beyond this are dropped
KEEP_RESULTS = 16  # analyses remembered per model, the least recently used beyond this dropped


class SnapshotStore:
    def __init__(self, roots: list[str], cache: ModelStore | None, keep: int = KEEP_MODELS) -> None:
        self.roots = [os.path.realpath(r) for r in roots] or [os.path.realpath(os.curdir)]
        self.cache = cache
        self.keep = max(1, keep)
        self.loads = 0  # models built or read from the disk cache (not found in memory)
        self._models: OrderedDict[tuple, Snapshot] = OrderedDict()
        self._results: dict[int, OrderedDict] = {}  # by id of the model; dropped when the model goes
        self.computations = 0  # analyses run (not found remembered)
        # One call works at a time: models build lazy columns on first use, and two threads
        # must not build them at once. A client's calls are sequential in practice anyway.
        self.lock = threading.Lock()

    def resolve(self, path: str, directory_too: bool = False) -> str:
        """The real path of ``path`` (relative paths start at the first root), or UsageError
        when it is outside every root, missing, or not a regular file (or, with
        ``directory_too``, a directory)."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise UsageError("path: give a snapshot file's path")
        full = path if os.path.isabs(path) else os.path.join(self.roots[0], path)
        real = os.path.realpath(full)
        if not any(_inside(real, root) for root in self.roots):
            where = ", ".join(self.roots)
            raise UsageError(f"{path}: outside the folders this server may read ({where}); start it with "
                             "--root to allow another")
        if not os.path.exists(real):
            raise UsageError(f"{path}: no such file")
        if not os.path.isfile(real) and not (directory_too and os.path.isdir(real)):
            what = "a directory" if os.path.isdir(real) else "not a regular file"
            raise UsageError(f"{path}: {what}, not a snapshot file")
        return real

    def open(self, path: str, progress=None) -> Snapshot:
        """The model of ``path``: from memory, else the model cache, else the file."""
        real = self.resolve(path)
        stat = os.stat(real)
        key = (real, stat.st_mtime_ns, stat.st_size)
        found = self._models.get(key)
        if found is not None:
            self._models.move_to_end(key)
            return found
        try:
            snapshot = open_snapshot(real, progress, cache=self.cache)
        except BaseException:
            give_memory_back()
            raise
        self.loads += 1
        for old in [k for k in self._models if k[0] == real]:
            del self._models[old]  # the file changed: its old model answers nothing now
        self._models[key] = snapshot
        while len(self._models) > self.keep:
            self._models.popitem(last=False)
        return snapshot

    def held(self) -> list[str]:
        return [key[0] for key in self._models]

    def computed(self, snapshots: tuple[Snapshot, ...], key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, remembered under ``key`` beside the first of ``snapshots`` (and
        forgotten with it; ``key`` must name the others, which are keyed by identity here)."""
        others = snapshots[1:]
        key = (key, tuple(id(s) for s in others))
        results = self._results.get(id(snapshots[0]))
        if results is None:
            results = self._results[id(snapshots[0])] = OrderedDict()
            weakref.finalize(snapshots[0], self._results.pop, id(snapshots[0]), None)
        if key in results:
            results.move_to_end(key)
            return results[key][0]
        value = compute()
        self.computations += 1
        results[key] = (value, others)  # the others held, so no other model can take their ids
        while len(results) > KEEP_RESULTS:
            results.popitem(last=False)
        return value


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def give_memory_back() -> None:
    """Collect what a failed load left and return freed heap pages to the system: glibc
    keeps them otherwise, and a refused 4 GB decompression bomb would stay resident."""
    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:  # not glibc: nothing to hand back this way
        pass
