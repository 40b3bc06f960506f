"""Where the model cache keeps a snapshot's model, and under what name, importing nothing
heavy: the command line asks whether a snapshot has a model kept before numpy is imported
(see memtui/load/ahead.py), so this module and the package's ``__init__`` stay light.

An entry is ``<folder>/v<FORMAT_VERSION>/<key>.mtc``, and what is kept beside it
``<key>.<name>``. The key is two parts: the file's (its size, modification time and the hash
of its two ends: fingerprint.py) and the model schema's (memtui/cache/layout.py). The file's
part alone tells that some model of this file is kept, which is all the early question needs;
both tell that it is one this memtui reads.
"""

from __future__ import annotations

import os

from memtui.cache.fingerprint import EDGE_BYTES, file_fingerprint

# 4: the pieces' checksums in place of crc32s; 5: entries named by the file's part, then the schema's
FORMAT_VERSION = 5
FILE_PART = 24  # hex digits of the key naming the file (96 bits)
SCHEMA_PART = 16  # hex digits naming the model's schema
ENTRY_SUFFIX = ".mtc"


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "memtui")


def format_folder(root: str) -> str:
    """The folder of this cache format under the cache's ``root``."""
    return os.path.join(root, f"v{FORMAT_VERSION}")


def file_part(path: str | os.PathLike) -> str:
    """The part of an entry's key that names the snapshot file's content (OSError if it
    cannot be read)."""
    return file_fingerprint(path, "model", EDGE_BYTES)[:FILE_PART]


def entry_key(path: str | os.PathLike, schema: str) -> str:
    """The key of ``path``'s model under the model schema ``schema``."""
    return file_part(path) + schema[:SCHEMA_PART]


def kept_entry(root: str, path: str | os.PathLike) -> str | None:
    """The entry in the cache at ``root`` that keeps a model of ``path``'s content, of any
    schema (the one written last, where models of several are kept); None when there is
    none, or either cannot be read."""
    try:
        prefix = file_part(path)
        with os.scandir(format_folder(root)) as entries:
            kept = [e for e in entries if e.name.startswith(prefix) and e.name.endswith(ENTRY_SUFFIX)]
        return max(kept, key=lambda e: e.stat().st_mtime_ns).path if kept else None
    except OSError:
        return None
