"""Opening an input file: checks that give one clear line, and transparent decompression.

Compression is recognised by magic bytes, never by file name, so a renamed file still
opens. Decompression streams: nothing is inflated into memory first.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from memtui.errors import MissingDependencyError, SnapshotError
from memtui.load.limits import GuardedStream, declared_too_long, find_false_length
from memtui.load.regular_file import MAGIC, NotRegularFile, not_a_file_message, open_regular_file

ProgressFn = Callable[[str, int, int], None]
_DIAGNOSE_LIMIT = 4 << 20  # memory errors past this far into a file are taken as real


@dataclass(frozen=True)
class SourceInfo:
    """What we know about the input before decoding it."""

    path: str
    size: int
    mtime: float
    compression: str | None


def inspect_source(path: str | os.PathLike) -> SourceInfo:
    """Check that ``path`` is a readable non-empty regular file and sniff its compression."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except PermissionError:
        raise SnapshotError(f"{path}: permission denied") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if os.path.isdir(path):
        raise SnapshotError(f"{path}: is a directory, not a snapshot file")
    if not stat.S_ISREG(st.st_mode):  # refused before an open that could wait for a writer
        raise SnapshotError(not_a_file_message(path, st.st_mode))
    try:
        with open_regular_file(path) as fh:
            head = fh.read(8)
    except NotRegularFile as exc:
        raise SnapshotError(not_a_file_message(path, exc.mode)) from None
    except PermissionError:
        raise SnapshotError(f"{path}: permission denied") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not head:
        raise SnapshotError(f"{path}: empty file")
    compression = next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)
    return SourceInfo(path=path, size=st.st_size, mtime=st.st_mtime, compression=compression)


class CountingReader(io.RawIOBase):
    """Wraps a raw file and reports how many bytes were consumed, for progress bars."""

    def __init__(self, raw: BinaryIO, total: int, progress: ProgressFn | None, stage: str) -> None:
        self._raw = raw
        self._total = total
        self._progress = progress
        self._stage = stage
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._raw.readinto(buffer)
        if n:
            self.consumed += n
            if self._progress is not None:
                self._progress(self._stage, self.consumed, self._total)
        return n or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_decompressed(info: SourceInfo, progress: ProgressFn | None = None) -> BinaryIO:
    """A buffered binary stream of the decompressed content of ``info.path``, guarded
    against declared lengths the file cannot hold (limits.py)."""
    return GuardedStream(open_unguarded(info, progress), info)


def open_unguarded(info: SourceInfo, progress: ProgressFn | None = None) -> BinaryIO:
    """The decompressed content without the guard: only for reads of a known, small size."""
    raw = open_regular_file(info.path, buffering=0)
    # Compressed input is read in small pieces: each inflates to many times its size, and
    # the progress (counted in file bytes) should move while that is decoded.
    buffer = 1 << 20 if info.compression is None else 1 << 16
    counted = io.BufferedReader(CountingReader(raw, info.size, progress, "reading"), buffer)
    if info.compression is None:
        return counted
    # Each decompressor is imported when a file needs it: most files are not compressed.
    if info.compression == "gzip":
        import gzip

        return io.BufferedReader(gzip.GzipFile(fileobj=counted, mode="rb"), 1 << 20)
    if info.compression == "xz":
        import lzma

        return io.BufferedReader(lzma.LZMAFile(counted, "rb"), 1 << 20)
    if info.compression == "bz2":
        import bz2

        return io.BufferedReader(bz2.BZ2File(counted, "rb"), 1 << 20)
    if info.compression == "zstd":
        try:
            import zstandard
        except ImportError:
            counted.close()
            raise MissingDependencyError(
                f"{info.path}: zstd-compressed; install the 'zstandard' package to read it "
                "(pip install zstandard)"
            ) from None
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(counted), 1 << 20)
    raise AssertionError(info.compression)


def decompression_errors() -> tuple[type[Exception], ...]:
    """What reading a damaged compressed file raises (gzip's BadGzipFile is an OSError). A
    function, so that lzma is imported only where a read failed: an ``except`` clause
    evaluates its types only when an exception reaches it."""
    import lzma

    return (EOFError, lzma.LZMAError, OSError)


def memory_error_message(source: GuardedStream | SourceInfo, description: str) -> str:
    """One line for a MemoryError while unpickling ``source`` (the stream being read, or
    the file): the false length that caused it when the start of the file holds one."""
    info = source.info if isinstance(source, GuardedStream) else source
    position = source.consumed if isinstance(source, GuardedStream) else 0
    if position <= _DIAGNOSE_LIMIT:  # far into a file, a memory error is more likely real
        found = _scan_start(info)
        if found is not None:
            end, length = found
            return declared_too_long(description, length, info.size - end if info.compression is None else None)
    return f"{description}: not enough memory to read this file"


def _scan_start(info: SourceInfo) -> tuple[int, int] | None:
    try:
        with open_unguarded(info) as again:
            data = again.read(_DIAGNOSE_LIMIT + (2 << 20))  # the unpickler reads up to ~1 MiB ahead
    except Exception:  # explaining the first failure must not raise a second one
        return None
    return find_false_length(data, info.size if info.compression is None else None)
