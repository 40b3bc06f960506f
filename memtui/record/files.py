"""Where snapshots go and how they are written: rank-aware names, compression, atomic writes.

Pure standard library: nothing here needs torch, so the naming and writing rules can be
tested on any machine.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import pickle
from collections.abc import Iterator, Mapping
from typing import IO

from memtui.atomic import atomic_write

# torch's own `_dump_snapshot` pickles with protocol 4 and memory_viz's JavaScript unpickler
# accepts protocols 2-4 only, so a newer default protocol would make files it cannot open.
PICKLE_PROTOCOL = 4

COMPRESSION_SUFFIXES = {".xz": "xz", ".gz": "gzip", ".bz2": "bz2"}
SNAPSHOT_SUFFIXES = (".pickle", ".pkl")


def compression_for(path: str | os.PathLike) -> str | None:
    """The compression a file name asks for: 'xz', 'gzip', 'bz2', or None for plain pickle."""
    _, ext = os.path.splitext(os.fspath(path))
    return COMPRESSION_SUFFIXES.get(ext.lower())


def split_snapshot_suffix(path: str) -> tuple[str, str]:
    """Split ``run.pickle.xz`` into ``('run', '.pickle.xz')`` so a tag can go in between."""
    stem, suffix = path, ""
    base, ext = os.path.splitext(stem)
    if ext.lower() in COMPRESSION_SUFFIXES:
        stem, suffix = base, ext
    base, ext = os.path.splitext(stem)
    if ext.lower() in SNAPSHOT_SUFFIXES:
        stem, suffix = base, ext + suffix
    return stem, suffix


def with_tag(path: str | os.PathLike, tag: str) -> str:
    """``run.pickle.xz`` + ``oom`` -> ``run.oom.pickle.xz`` (a tag before the snapshot suffix)."""
    stem, suffix = split_snapshot_suffix(os.fspath(path))
    return f"{stem}.{tag}{suffix}"


def launcher_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's rank when a launcher (torchrun, DDP, DeepSpeed) started it, else None.

    ``RANK`` is unique across nodes; ``LOCAL_RANK`` only within one, so it is the fallback
    for launchers that set nothing else.
    """
    env = os.environ if environ is None else environ
    for key in ("RANK", "LOCAL_RANK"):
        value = env.get(key, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return None


def rank_path(path: str | os.PathLike, environ: Mapping[str, str] | None = None) -> str:
    """The file this process should write for ``path``.

    ``{rank}`` in the name is replaced by the rank. Without it, a process started by a
    launcher gets ``.rankN`` before the suffix, so ranks never overwrite each other's file.
    Outside a launcher the path is returned unchanged (``{rank}`` becomes 0).
    """
    text = os.fspath(path)
    rank = launcher_rank(environ)
    if "{rank}" in text:
        return text.replace("{rank}", str(rank if rank is not None else 0))
    if rank is None:
        return text
    return with_tag(text, f"rank{rank}")


@contextlib.contextmanager
def _compressed(raw: IO[bytes], compression: str | None) -> Iterator[IO[bytes]]:
    if compression is None:
        yield raw
        return
    if compression == "xz":
        stream: IO[bytes] = lzma.LZMAFile(raw, "wb", preset=6)
    elif compression == "gzip":
        # mtime=0 keeps the bytes reproducible; level 6 is most of level 9's gain at a
        # fraction of its time, which matters when the dump happens at an OOM.
        stream = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
    elif compression == "bz2":
        stream = bz2.BZ2File(raw, "wb")
    else:  # pragma: no cover - guarded by compression_for
        raise ValueError(f"unknown compression {compression!r}")
    with stream:
        yield stream


def write_snapshot(snapshot: object, path: str | os.PathLike) -> str:
    """Pickle ``snapshot`` (protocol 4) to ``path`` atomically, compressed by its extension."""
    compression = compression_for(path)

    target = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # The same atomic write as exports and caches: a reader (or a crash half-way through a
    # multi-gigabyte dump) never sees a partial file, and a killed dump's temporary file is
    # removed by the next write into that folder. An existing file is replaced.
    with atomic_write(target, force=True) as raw, _compressed(raw, compression) as out:
        pickle.dump(snapshot, out, protocol=PICKLE_PROTOCOL)
    return target
