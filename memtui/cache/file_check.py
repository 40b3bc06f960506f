"""A cache file's bytes checked before any of them is used, importing no numpy.

The header, the metadata (a pickle of plain values, walked and then read with every global
refused), the zeros between the metadata and the data, and the checksum of every piece of
every stored array (memtui/cache/checksum.py) are checked here, on every core the process
may use; the arrays are made from the checked file afterwards (memtui/cache/fileformat.py).
Nothing here needs numpy, so the checks of a kept model can start before numpy is imported
and run while it is (memtui/cache/check_ahead.py): at ten million events they are 0.15 s
of a core's time on each warm open.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memtui.cache.checksum import checksum
from memtui.cache.names import FORMAT_VERSION
from memtui.cores import each_on_threads, usable_cores
from memtui.load.opcode_check import OpcodeCheck
from memtui.load.regular_file import NotRegularFile, open_regular_file
from memtui.load.safe_pickle import RestrictedUnpickler

MAGIC = b"MEMTUI\x00C"
HEADER = struct.Struct("<8sIQIQ")
ALIGN = 4096
CHECK_PIECE = 8 << 20  # one checksum per piece of an array, so that many cores can check one array

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class CorruptCache(Exception):
    """The file is not a complete, intact cache file of this version."""


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def each_on_cores(task: Callable[[_Item], _Result], items: list[_Item], cores: int | None = None) -> list[_Result]:
    """``task`` of each item, in order, on a thread a core the process may use, or on
    ``cores`` threads (the checksums and numpy's copies let go of the GIL): the checksums,
    written and read, and the pieces stored. Daemon threads, unlike a pool's: a piece stuck on
    a slow disk must not hold up the end of a process that ends on a signal (the cache
    abandons such a write and removes its file, see ModelCache.abandon)."""
    return each_on_threads(task, items, min(cores or usable_cores(), 32), "memtui-cache-piece")


def piece_checks(data: memoryview) -> list[int]:
    """The checksum of each CHECK_PIECE of an array's bytes followed by its padding to the page."""
    padded_end = aligned(len(data))
    return [checksum(data[start:min(start + CHECK_PIECE, len(data))], min(CHECK_PIECE, padded_end - start))
            for start in range(0, max(padded_end, 1), CHECK_PIECE)]


FileIdentity = tuple[int, int, int, int, int]


def identity(st: os.stat_result) -> FileIdentity:
    """What tells one file's content from another's: its device and inode, size, and times of
    modification and change (a file rewritten in place changes the last)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass
class CheckedFile:
    """A cache file whose every byte was checked: its metadata, and its data as a private
    (copy-on-write) memory map, from ``data_start``; the arrays are views of it."""

    mapped: mmap.mmap
    meta: dict[str, Any]
    data_start: int
    identity: FileIdentity

    @property
    def size(self) -> int:
        return self.identity[2]


def check_file(path: str, cores: int | None = None) -> CheckedFile:
    """The cache file at ``path``, every byte of it checked on ``cores`` threads (else one a
    core); raises CorruptCache otherwise (and OSError where it cannot be read)."""
    try:
        fh = open_regular_file(path)  # something else put there (a pipe) is refused, not waited on
    except NotRegularFile:
        raise CorruptCache("not a regular file") from None
    with fh:
        st = os.fstat(fh.fileno())
        size = st.st_size
        head = fh.read(HEADER.size)
        if len(head) != HEADER.size:
            raise CorruptCache("short header")
        magic, version, meta_len, meta_crc, total = HEADER.unpack(head)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise CorruptCache("not a cache file of this version")
        if total != size or HEADER.size + meta_len > size:
            raise CorruptCache(f"length {size}, expected {total}")
        meta_bytes = fh.read(meta_len)
        if zlib.crc32(meta_bytes) != meta_crc:
            raise CorruptCache("metadata checksum")
        try:
            # Walked first, as every pickle memtui reads: a cache file is only as trusted as
            # the folder it is in, and a memo index or length that lies would allocate gigabytes.
            OpcodeCheck(path, len(meta_bytes), len(meta_bytes), lambda n, at: f"a length of {n}").feed(meta_bytes)
            meta = RestrictedUnpickler(io.BytesIO(meta_bytes)).load()
        except Exception as exc:
            raise CorruptCache(f"metadata unreadable ({type(exc).__name__})") from None
        data_start = aligned(HEADER.size + meta_len)
        if not isinstance(meta, dict) or data_start + meta.get("data_length", -1) != size:
            raise CorruptCache("data length")
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    # Every byte after the metadata, padding included, is checked before anything is used.
    if any(mapped[HEADER.size + meta_len:data_start]):
        raise CorruptCache("bytes between the metadata and the data")
    pieces, extents = _stored_pieces(meta, data_start, size)
    view = memoryview(mapped)
    got = each_on_cores(lambda piece: checksum(view[piece[0]:piece[1]], piece[1] - piece[0]), pieces, cores)
    for (_, _, expected, name), check in zip(pieces, got):
        if check != expected:
            raise CorruptCache(f"array {name} checksum")
    position = data_start
    for start, end in sorted(extents):
        if start != position:
            raise CorruptCache("arrays overlap or leave a gap")
        position = end
    if position != size:
        raise CorruptCache("data not covered by the array table")
    return CheckedFile(mapped, meta, data_start, identity(st))


def _stored_pieces(meta: dict, data_start: int, size: int) -> tuple[list[tuple[int, int, int, str]],
                                                                      list[tuple[int, int]]]:
    """The pieces of the stored arrays, each (start, end, checksum, array name), and each
    array's extent, padding included; raises CorruptCache for an array the file cannot hold.
    (An array given by its value takes no bytes: fileformat bounds it when it makes it.)"""
    pieces: list[tuple[int, int, int, str]] = []
    extents = []
    try:
        for entry in meta["arrays"]:
            if "fill" in entry:
                continue
            name, offset, nbytes, checks = entry["name"], entry["offset"], entry["nbytes"], entry["checks"]
            if type(offset) is not int or type(nbytes) is not int or nbytes < 0 or not isinstance(checks, list):
                raise CorruptCache(f"array {name} does not fit")
            start = data_start + offset
            end = start + aligned(nbytes)
            if start < data_start or end > size or len(checks) != max(1, -(-(end - start) // CHECK_PIECE)):
                raise CorruptCache(f"array {name} does not fit")
            extents.append((start, end))
            pieces += [(at, min(at + CHECK_PIECE, end), check, name)
                       for at, check in zip(range(start, end, CHECK_PIECE), checks)]
            if start == end:
                pieces.append((start, end, checks[0], name))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CorruptCache(f"array table ({type(exc).__name__})") from None
    return pieces, extents
