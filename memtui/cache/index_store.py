"""The explorer's time-travel index, kept beside the model cache.

The replayer's interval indexes (memtui/replay.py) take about a second to build at 10M
events, in a worker after the first screen; keys pressed meanwhile share the machine with
it. They are a function of the model alone, so once built they are kept beside its cache
entry (one file per device, in the model cache's own verified format) and read on the next
open instead of built. A file that does not fit the model is removed and the index built.
"""

from __future__ import annotations

import os

from memtui import __version__, logs
from memtui.cache.fileformat import CorruptCache, WriteStopped, read_cache_file, write_cache_file
from memtui.cache.store import ModelCache, beside_entry
from memtui.replay import Replayer

# Part of the file name, with memtui's version: an index built another way gets a new name.
INDEX_VERSION = 1


def _name(device: int) -> str:
    return f"index{INDEX_VERSION}-{__version__}.d{device}.idx"  # not .mtc: the cache prunes those as entries


def index_path(cache: ModelCache, source: str | os.PathLike, device: int) -> str:
    """Where the index of ``device`` of ``source`` is kept (raises OSError if ``source``
    cannot be read)."""
    return os.path.join(cache.folder, f"{cache.key(source)}.{_name(device)}")


def load_index(cache: ModelCache | None, source, device: int, replayer: Replayer) -> bool:
    """Give ``replayer`` the indexes kept for ``device`` of ``source``; False when there are
    none (or none that fit: that file is removed, so the next one written is right)."""
    path = beside_entry(cache, source, _name(device))
    if path is None or not os.path.exists(path):
        return False
    try:
        arrays, meta = read_cache_file(path)
        strides = meta.get("strides")
        if not isinstance(strides, dict) or not all(isinstance(strides.get(k), int) for k in ("blocks", "segments")):
            raise CorruptCache("no strides")
        replayer.adopt_indexes(arrays, strides)
    except (CorruptCache, KeyError, ValueError, TypeError) as exc:
        logs.info(logs.CACHE, "index for %s not read (%s); built again", source, exc)
        try:
            os.unlink(path)
        except OSError:
            pass
        return False
    except OSError:
        return False
    return True


def store_index_later(cache: ModelCache | None, source, device: int, replayer: Replayer) -> None:
    """Keep ``replayer``'s built indexes for the next open, in a background writer held
    back like the model's writes."""
    path = beside_entry(cache, source, _name(device))
    if cache is None or path is None or not replayer.indexed or os.path.exists(path):
        return
    arrays, strides = replayer.kept_indexes()
    cache.write_later(lambda: _write(cache, path, arrays, strides))


def _write(cache: ModelCache, path: str, arrays: dict, strides: dict[str, int]) -> None:
    if not cache.check_writable():
        return
    try:
        write_cache_file(path, arrays, {"strides": strides}, stop=cache.stopping)
    except WriteStopped:
        pass  # the process is ending on a signal; nothing of the file is left
