"""One cache file: a fixed header, plain metadata, then every array, page-aligned.

Layout::

    magic (8) | format version (4) | metadata length (8) | metadata crc32 (4) | file length (8)
    metadata: a pickle of plain values only (read with every global refused)
    arrays: raw little-endian data, each at a 4 KiB boundary

The metadata lists each array's name, dtype, shape and offset, and the checksum of each 8 MiB
piece of its bytes and padding (memtui/cache/checksum.py); an integer array whose every
value is the same (a column no entry of the trace sets) is listed with that value and takes
no bytes. Reading checks all of it, every byte of data included, before a single array is
handed out: a cache file is never trusted. The checks (memtui/cache/file_check.py) need no
numpy, and may have run while the command was imported (memtui/cache/check_ahead.py); the
pieces are checked on every core the process may use. Arrays are views of a private
(copy-on-write) memory map, so a warm open costs page faults, not reads, and nothing can
write back into the file.
"""

from __future__ import annotations

import errno
import mmap
import os
import pickle
import zlib
from collections.abc import Callable

import numpy as np

from memtui.atomic import make_temp_file, temp_file_done
from memtui.cache import check_ahead, file_check
from memtui.cache.file_check import HEADER, MAGIC, CheckedFile, CorruptCache, aligned, check_file, each_on_cores
from memtui.cache.names import FORMAT_VERSION

__all__ = ["CorruptCache", "WriteStopped", "read_cache_file", "write_cache_file"]

_PIECE = 8 << 20  # a write stops within one piece of being asked to
_FILL_FROM = 64 << 10  # a constant integer array from this size is stored as its value
FILL_RATIO = 8  # the arrays given by their value take at most this many times the file's size


class WriteStopped(Exception):
    """A cache write was stopped by its caller; nothing of it is left on disk."""


def write_cache_file(path: str, arrays: dict[str, np.ndarray], meta: dict,
                     stop: Callable[[], bool] = lambda: False) -> None:
    """Write atomically: a temporary file in the same folder, then rename over ``path``.

    No fsync: every byte is checked when the file is read, so a file cut short or left
    stale by a crash is rebuilt, never trusted; syncing half a gigabyte would cost every
    first open about half a second more. ``stop`` is asked between pieces of data: when it
    says so, the temporary file is removed and :class:`WriteStopped` raised (the process is
    ending on a signal).
    """
    arrays = {name: np.ascontiguousarray(array) for name, array in arrays.items()}
    fills = {name: _fill_value(array) for name, array in arrays.items()}
    stored_bytes = sum(aligned(array.nbytes) for name, array in arrays.items() if fills[name] is None)
    table: list[dict] = []
    stored: list[np.ndarray] = []
    offset = 0
    for name, array in arrays.items():
        fill = fills[name]
        if fill is not None and array.nbytes <= FILL_RATIO * stored_bytes:  # the reader's bound
            table.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "fill": fill})
            continue
        table.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "offset": offset,
                      "nbytes": array.nbytes})
        stored.append(array)
        offset += aligned(array.nbytes)
    data = [memoryview(array).cast("B") if array.nbytes else memoryview(b"") for array in stored]
    checks = each_on_cores(file_check.piece_checks, data)
    entries = [entry for entry in table if "fill" not in entry]
    for entry, entry_checks in zip(entries, checks):
        entry["checks"] = entry_checks
    meta = dict(meta, arrays=table, data_length=offset)
    meta_bytes = pickle.dumps(meta, protocol=4)
    data_start = aligned(HEADER.size + len(meta_bytes))
    total = data_start + offset
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes), total)
    head = header + meta_bytes + bytes(data_start - HEADER.size - len(meta_bytes))
    # Every piece starts at a page boundary of the file (each array does), so each can be
    # mapped on its own; the padding after each array is the file's zeros.
    pieces = [(data_start + entry["offset"] + at, view[at:at + _PIECE])
              for entry, view in zip(entries, data) for at in range(0, len(view), _PIECE)]

    fd, tmp = make_temp_file(path)
    try:
        try:
            written = _write_data(fd, head, pieces, total, stop)
        finally:
            os.close(fd)
        if not written or stop():
            raise WriteStopped(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        temp_file_done(tmp)


def _write_data(fd: int, head: bytes, pieces: list[tuple[int, memoryview]], total: int,
                stop: Callable[[], bool]) -> bool:
    """The file's ``total`` bytes: ``head`` at the start, each piece at its offset, zeros
    between; False when ``stop`` said to stop.

    The file's blocks are reserved first, then the pieces are copied into it through memory
    maps on every core the process may use: filling the page cache is most of a cache
    write's time, and writes to one file take turns (its lock), where page faults in its
    mapping do not (on 2 cores 388 MB took 0.5 s instead of 1.1 s). Reserving the blocks
    first is what makes the maps safe: a full disk is an error here, not a signal that ends
    the process when a page is first written. Where the file system reserves nothing
    (posix_fallocate unsupported), the pieces are written in turn.
    """
    os.pwrite(fd, head, 0)
    try:
        os.posix_fallocate(fd, 0, total)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        for at, piece in pieces:
            if stop():
                return False
            _store_piece(fd, at, piece, mapped=False)
        os.ftruncate(fd, total)
        return True
    return all(each_on_cores(lambda item: not stop() and _store_piece(fd, *item, mapped=True), pieces))


def _store_piece(fd: int, at: int, piece: memoryview, mapped: bool) -> bool:
    """Write ``piece`` at offset ``at`` of ``fd``: copied into a map of just that part of
    the file (numpy copies without the GIL), or written. True."""
    if not mapped:
        os.pwrite(fd, piece, at)
        return True
    skip = at % mmap.ALLOCATIONGRANULARITY  # a map starts at a multiple of it (a page, or 64 KiB)
    with mmap.mmap(fd, skip + len(piece), offset=at - skip) as window:
        target = np.frombuffer(window, np.uint8, len(piece), skip)
        target[:] = np.frombuffer(piece, np.uint8)
        del target  # the map cannot close while a view of it is alive
    return True


def _fill_value(array: np.ndarray) -> int | None:
    """The one value of a large integer array that holds nothing else, else None."""
    if array.dtype.kind not in "biu" or array.nbytes < _FILL_FROM:
        return None
    flat = array.reshape(-1)
    first = flat[0]
    # Most columns differ within their first values, so those are compared first; the
    # rest is read by its least and greatest value, with no temporary array of the size.
    if not (flat[:4096] == first).all():
        return None
    return int(first) if flat.min() == first and flat.max() == first else None


def read_cache_file(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, metadata) of a verified cache file; raises CorruptCache otherwise. The file's
    bytes are checked here, or were checked while the command's imports ran (check_ahead)."""
    checked = check_ahead.take(path) or check_file(path)
    return _arrays_of(checked), checked.meta


def _arrays_of(checked: CheckedFile) -> dict[str, np.ndarray]:
    """Each array of a checked file: a view of its data, or made from its one value."""
    arrays = {}
    most = FILL_RATIO * checked.size  # bytes an array given by its value may take at most
    try:
        for entry in checked.meta["arrays"]:
            name, dtype, shape = entry["name"], np.dtype(entry["dtype"]), tuple(entry["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            if dtype.hasobject or count < 0:
                raise CorruptCache(f"array {name} does not fit")
            if "fill" in entry:
                fill = entry["fill"]
                # bounded by the file's size, so a lying table cannot make the reader allocate much
                if dtype.kind not in "biu" or not isinstance(fill, int) or count * dtype.itemsize > most:
                    raise CorruptCache(f"array {name} does not fit")
                # OverflowError for a value the type cannot hold. Zeros are the system's untouched
                # pages: nothing is written (a 10M-row column of zeros cost 10-80 MB written).
                arrays[name] = np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
                continue
            if count * dtype.itemsize != entry["nbytes"]:  # its place and bytes were checked (file_check)
                raise CorruptCache(f"array {name} does not fit")
            start = checked.data_start + entry["offset"]
            arrays[name] = np.frombuffer(checked.mapped, dtype, count, start).reshape(shape)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CorruptCache(f"array table ({type(exc).__name__})") from None
    return arrays
