"""The snapshots a server has opened, and the folders it may open them from.

A model stays in memory between tool calls, keyed by the file's resolved path, size and
modification time, so ten questions about one large file pay its load once (and a file
rewritten in between is loaded again). Below that sits memtui's on-disk model cache, so a
restarted server maps the columns instead of decoding the file again.

Only regular files under the allowed roots are opened: a path is resolved (symlinks
included) before it is checked, so a link inside a root pointing outside it is refused.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from memtui.errors import UsageError
from memtui.model import Snapshot
from memtui.open import ModelStore, open_snapshot

KEEP_MODELS = 4  # models held in memory; the least recently used beyond this are dropped


class SnapshotStore:
    def __init__(self, roots: list[str], cache: ModelStore | None, keep: int = KEEP_MODELS) -> None:
        self.roots = [os.path.realpath(r) for r in roots] or [os.path.realpath(os.curdir)]
        self.cache = cache
        self.keep = max(1, keep)
        self.loads = 0  # models built or read from the disk cache (not found in memory)
        self._models: OrderedDict[tuple, Snapshot] = OrderedDict()
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
        snapshot = open_snapshot(real, progress, cache=self.cache)
        self.loads += 1
        for old in [k for k in self._models if k[0] == real]:
            del self._models[old]  # the file changed: its old model answers nothing now
        self._models[key] = snapshot
        while len(self._models) > self.keep:
            self._models.popitem(last=False)
        return snapshot

    def held(self) -> list[str]:
        return [key[0] for key in self._models]


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False
