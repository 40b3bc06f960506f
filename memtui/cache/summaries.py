"""Cached rank summaries: one small msgpack file per snapshot, next to the model cache.

A summary is a few kilobytes where the snapshot may be a gigabyte, so a run over
thousands of ranks whose summaries are cached reads only the summaries (and the two
ends of each snapshot, for its key). The key is the model cache's (size, modification
time, a hash of both ends of the file) with the summary's version, the call-site depth
and memtui's version mixed in: a changed file, an older memtui or another depth never
finds an entry, so nothing stale is ever read. Summaries of files that failed are not
kept: the failure may be passing (a file still being written, a worker that died).

Entries live in ``<cache root>/summaries/v<N>/`` and are written atomically, so any
number of memtui processes can share the folder. The least recently used entries
beyond :data:`KEEP_SUMMARIES` are removed after a run that wrote new ones.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import msgpack

from memtui import __version__, logs
from memtui.analysis.ranks import SUMMARY_VERSION, rank_from_name
from memtui.atomic import remove_quietly, touch_quietly, write_bytes_atomic
from memtui.cache.fingerprint import file_fingerprint
from memtui.cache.store import ModelCache, default_cache_dir
from memtui.errors import MemtuiError
from memtui.load.regular_file import open_regular_file

# Keys are computed for every file on every run, on the machine that runs memtui: at
# 4,096 files, hashing 1 MiB at each end (as the model cache does) would read 8 GiB from
# the shared file system just to find out that nothing changed. 64 KiB ends read 512 MiB
# and still catch a rewrite that kept the size and the time stamp.
SUMMARY_EDGE = 64 << 10
KEEP_SUMMARIES = 20_000  # a few kilobytes each: about 50 MB at most
SUFFIX = ".msgpack"


def summary_key(path: str | os.PathLike, depth: int) -> str:
    """The cache key of ``path``'s summary at call-site ``depth``; raises OSError if unreadable."""
    return file_fingerprint(path, f"rank-summary:{SUMMARY_VERSION}:{depth}:{__version__}", SUMMARY_EDGE)


def default_summary_cache(model_cache: ModelCache | None) -> SummaryCache | None:
    """The summary cache beside ``model_cache``, so ``--cache-dir`` moves both; None without
    a model cache (``--no-cache``)."""
    return None if model_cache is None else SummaryCache(model_cache.root)


def _stderr_warning(message: str) -> None:
    print(f"memtui: {message}", file=sys.stderr)


class SummaryCache:
    """Load and store rank summaries by :func:`summary_key`."""

    def __init__(self, root: str | None = None, warn: Callable[[str], None] = _stderr_warning) -> None:
        self.root = os.path.abspath(root or default_cache_dir())
        self.folder = os.path.join(self.root, "summaries", f"v{SUMMARY_VERSION}")
        self.disabled = False
        self.written = 0
        self.hits = 0
        self._warn = warn

    def entry_path(self, key: str) -> str:
        return os.path.join(self.folder, key + SUFFIX)

    def load(self, key: str, path: str) -> dict | None:
        """The summary stored under ``key``, naming ``path`` (the same content may have been
        summarised under another name), or None."""
        if self.disabled:
            return None
        entry = self.entry_path(key)
        try:
            with open_regular_file(entry) as fh:  # a pipe put there is refused, not waited on
                stored = msgpack.unpackb(fh.read(), raw=False, strict_map_key=False,
                                        unicode_errors="surrogatepass")
            summary = stored["summary"]
            if stored.get("key") != key or summary.get("version") != SUMMARY_VERSION or summary.get("error"):
                raise ValueError("written for another file or version")
        except FileNotFoundError:
            return None
        except OSError as exc:
            logs.info(logs.CACHE, "summary %s unreadable (%s)", entry, exc)
            return None
        except (ValueError, KeyError, TypeError, AttributeError, msgpack.UnpackException) as exc:
            logs.info(logs.CACHE, "summary %s rejected (%s)", entry, exc)
            remove_quietly(entry)
            return None
        touch_quietly(entry)
        self.hits += 1
        return {**summary, "file": path, "rank": rank_from_name(path)}

    def store(self, key: str, summary: dict) -> None:
        """Keep a good summary; failures are not cached, and a cache that cannot be written
        is turned off with one warning."""
        if self.disabled or summary.get("error"):
            return
        try:
            data = msgpack.packb({"key": key, "summary": summary}, use_bin_type=True,
                                 unicode_errors="surrogatepass")
        except (TypeError, ValueError, OverflowError) as exc:  # not plain after all: compute it again next time
            logs.info(logs.CACHE, "summary of %s not cached (%s)", summary.get("file"), exc)
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            write_bytes_atomic(self.entry_path(key), data, force=True)
        except (OSError, MemtuiError) as exc:
            self.disabled = True
            self._warn(f"summary cache off: cannot write to {self.folder} ({exc})")
            return
        self.written += 1

    def prune(self, keep: int = KEEP_SUMMARIES) -> int:
        """Remove the least recently used entries beyond ``keep``; how many were removed."""
        try:
            names = [n for n in os.listdir(self.folder) if n.endswith(SUFFIX)]
        except OSError:
            return 0
        if len(names) <= keep:
            return 0
        aged = []
        for name in names:
            full = os.path.join(self.folder, name)
            try:
                aged.append((os.stat(full).st_mtime, full))
            except OSError:
                continue
        aged.sort(reverse=True)
        for _, full in aged[keep:]:
            remove_quietly(full)
        return max(0, len(aged) - keep)


