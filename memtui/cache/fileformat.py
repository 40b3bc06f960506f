"""One cache file: a fixed header, plain metadata, then every array, page-aligned.

Layout::

    magic (8) | format version (4) | metadata length (8) | metadata crc32 (4) | file length (8)
    metadata: a pickle of plain values only (read with every global refused)
    arrays: raw little-endian data, each at a 4 KiB boundary

The metadata lists each array's name, dtype, shape and offset, and the checksum of each 8 MiB
piece of its bytes and padding (memtui/cache/checksum.py); an integer array whose every
value is the same (a column no entry of the trace sets) is listed with that value and takes
no bytes. Reading checks all of it, every byte of data included, before a single array is
handed out: a cache file is never trusted. The pieces are checked on every core the process
may use. Arrays are views of a private (copy-on-write) memory map, so a warm open costs page
faults, not reads, and nothing can write back into the file.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import pickle
import struct
import threading
import zlib
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from memtui.atomic import make_temp_file, temp_file_done
from memtui.cache.checksum import checksum
from memtui.cache.names import FORMAT_VERSION
from memtui.cores import usable_cores
from memtui.load.opcode_check import OpcodeCheck
from memtui.load.regular_file import NotRegularFile, open_regular_file
from memtui.load.safe_pickle import RestrictedUnpickler

MAGIC = b"MEMTUI\x00C"
_HEADER = struct.Struct("<8sIQIQ")
_ALIGN = 4096
_PIECE = 8 << 20  # a write stops within one piece of being asked to
CHECK_PIECE = 8 << 20  # one checksum per piece of an array, so that many cores can check one array
_FILL_FROM = 64 << 10  # a constant integer array from this size is stored as its value
FILL_RATIO = 8  # the arrays given by their value take at most this many times the file's size


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class CorruptCache(Exception):
    """The file is not a complete, intact cache file of this version."""


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
    stored_bytes = sum(_aligned(array.nbytes) for name, array in arrays.items() if fills[name] is None)
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
        offset += _aligned(array.nbytes)
    data = [memoryview(array).cast("B") if array.nbytes else memoryview(b"") for array in stored]
    checks = _each_on_cores(_piece_checks, data)
    entries = [entry for entry in table if "fill" not in entry]
    for entry, piece_checks in zip(entries, checks):
        entry["checks"] = piece_checks
    meta = dict(meta, arrays=table, data_length=offset)
    meta_bytes = pickle.dumps(meta, protocol=4)
    data_start = _aligned(_HEADER.size + len(meta_bytes))
    total = data_start + offset
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes), total)
    head = header + meta_bytes + bytes(data_start - _HEADER.size - len(meta_bytes))
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
    return all(_each_on_cores(lambda item: not stop() and _store_piece(fd, *item, mapped=True), pieces))


def _each_on_cores(task: Callable[[_Item], _Result], items: list[_Item]) -> list[_Result]:
    """``task`` of each item, in order, on a thread a core the process may use (the checksums
    and numpy's copies let go of the GIL): the checksums, written and read, and the pieces
    stored. Daemon threads, unlike a pool's: a piece stuck on a slow disk must not hold up
    the end of a process that ends on a signal (the cache abandons such a write and
    removes its file, see ModelCache.abandon)."""
    results: list = [None] * len(items)
    errors: list[BaseException] = []
    order = iter(range(len(items)))  # shared: each thread takes the next index (atomic)

    def work() -> None:
        for i in order:
            try:
                results[i] = task(items[i])
            except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
                errors.append(exc)
                return

    threads = [threading.Thread(target=work, name="memtui-cache-piece", daemon=True)
               for _ in range(min(usable_cores(), 32, len(items)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


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


def _piece_checks(data: memoryview) -> list[int]:
    """The checksum of each CHECK_PIECE of an array's bytes followed by its padding to the page."""
    padded_end = _aligned(len(data))
    return [checksum(data[start:min(start + CHECK_PIECE, len(data))], min(CHECK_PIECE, padded_end - start))
            for start in range(0, max(padded_end, 1), CHECK_PIECE)]


def read_cache_file(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, metadata) of a verified cache file; raises CorruptCache otherwise."""
    try:
        fh = open_regular_file(path)  # something else put there (a pipe) is refused, not waited on
    except NotRegularFile:
        raise CorruptCache("not a regular file") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(_HEADER.size)
        if len(head) != _HEADER.size:
            raise CorruptCache("short header")
        magic, version, meta_len, meta_crc, total = _HEADER.unpack(head)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise CorruptCache("not a cache file of this version")
        if total != size or _HEADER.size + meta_len > size:
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
        data_start = _aligned(_HEADER.size + meta_len)
        if not isinstance(meta, dict) or data_start + meta.get("data_length", -1) != size:
            raise CorruptCache("data length")
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    # Every byte after the metadata, padding included, is checked before anything is used.
    if any(mapped[_HEADER.size + meta_len:data_start]):
        raise CorruptCache("bytes between the metadata and the data")
    arrays = {}
    pieces: list[tuple[int, int, int, str]] = []  # (start, end, checksum, array name)
    extents = []
    try:
        for entry in meta["arrays"]:
            name, dtype, shape = entry["name"], np.dtype(entry["dtype"]), tuple(entry["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            if dtype.hasobject or count < 0:
                raise CorruptCache(f"array {name} does not fit")
            if "fill" in entry:
                fill = entry["fill"]
                # bounded by the file's size, so a lying table cannot make the reader allocate much
                if dtype.kind not in "biu" or not isinstance(fill, int) or count * dtype.itemsize > FILL_RATIO * size:
                    raise CorruptCache(f"array {name} does not fit")
                # OverflowError for a value the type cannot hold. Zeros are the system's untouched
                # pages: nothing is written (a 10M-row column of zeros cost 10-80 MB written).
                arrays[name] = np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
                continue
            start = data_start + entry["offset"]
            end = start + _aligned(entry["nbytes"])
            checks = entry["checks"]
            if count * dtype.itemsize != entry["nbytes"] or start < data_start or end > size \
                    or len(checks) != max(1, -(-(end - start) // CHECK_PIECE)):
                raise CorruptCache(f"array {name} does not fit")
            arrays[name] = np.frombuffer(mapped, dtype, count, start).reshape(shape)
            extents.append((start, end))
            pieces += [(at, min(at + CHECK_PIECE, end), check, name)
                       for at, check in zip(range(start, end, CHECK_PIECE), checks)]
            if start == end:
                pieces.append((start, end, checks[0], name))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CorruptCache(f"array table ({type(exc).__name__})") from None
    view = memoryview(mapped)
    got = _each_on_cores(lambda piece: checksum(view[piece[0]:piece[1]], piece[1] - piece[0]), pieces)
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
    return arrays, meta


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
