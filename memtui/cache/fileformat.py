"""One cache file: a fixed header, plain metadata, then every array, page-aligned.

Layout::

    magic (8) | format version (4) | metadata length (8) | metadata crc32 (4) | file length (8)
    metadata: a pickle of plain values only (read with every global refused)
    arrays: raw little-endian data, each at a 4 KiB boundary

The metadata lists each array's name, dtype, shape, offset and the crc32 of its bytes and
padding. Reading checks all of it, every byte of data included, before a single array is
handed out: a cache file is never trusted. Arrays are views of a private (copy-on-write)
memory map, so a warm open costs page faults, not reads, and nothing can write back into
the file.
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import struct
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from memtui.atomic import make_temp_file, temp_file_done
from memtui.load.opcode_check import OpcodeCheck
from memtui.load.safe_pickle import RestrictedUnpickler
from memtui.load.source import NotRegularFile, open_regular_file

MAGIC = b"MEMTUI\x00C"
FORMAT_VERSION = 2
_HEADER = struct.Struct("<8sIQIQ")
_ALIGN = 4096
_PIECE = 8 << 20  # a write stops within one piece of being asked to


class CorruptCache(Exception):
    """The file is not a complete, intact cache file of this version."""


class WriteStopped(Exception):
    """A cache write was stopped by its caller; nothing of it is left on disk."""


def write_cache_file(path: str, arrays: dict[str, np.ndarray], meta: dict,
                     stop: Callable[[], bool] = lambda: False) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over ``path``.

    ``stop`` is asked between pieces of data: when it says so, the temporary file is
    removed and :class:`WriteStopped` raised (the process is ending on a signal).
    """
    table = []
    offset = 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        arrays[name] = array
        padding = _aligned(array.nbytes) - array.nbytes
        table.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "offset": offset,
                      "nbytes": array.nbytes, "crc": zlib.crc32(bytes(padding), zlib.crc32(array))})
        offset += array.nbytes + padding
    meta = dict(meta, arrays=table, data_length=offset)
    meta_bytes = pickle.dumps(meta, protocol=4)
    data_start = _aligned(_HEADER.size + len(meta_bytes))
    total = data_start + offset
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes), total)

    fd, tmp = make_temp_file(path)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(header)
            out.write(meta_bytes)
            out.write(bytes(data_start - _HEADER.size - len(meta_bytes)))
            for entry in table:
                data = memoryview(arrays[entry["name"]]).cast("B")
                for start in range(0, len(data), _PIECE):
                    if stop():
                        raise WriteStopped(path)
                    out.write(data[start:start + _PIECE])
                out.write(bytes(_aligned(entry["nbytes"]) - entry["nbytes"]))
            out.flush()
            if stop():  # before the fsync, the one step that can take seconds
                raise WriteStopped(path)
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        temp_file_done(tmp)


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
    # Every byte after the metadata, padding included, is checked before anything is used;
    # the arrays on two threads at once (crc32 lets go of the GIL).
    if any(mapped[_HEADER.size + meta_len:data_start]):
        raise CorruptCache("bytes between the metadata and the data")
    arrays = {}
    try:
        spans = []
        for entry in meta["arrays"]:
            dtype = np.dtype(entry["dtype"])
            count = int(np.prod(entry["shape"], dtype=np.int64))
            start = data_start + entry["offset"]
            end = start + _aligned(entry["nbytes"])
            if dtype.hasobject or count * dtype.itemsize != entry["nbytes"] or end > size:
                raise CorruptCache(f"array {entry['name']} does not fit")
            arrays[entry["name"]] = np.frombuffer(mapped, dtype, count, start).reshape(entry["shape"])
            spans.append((start, end, entry["crc"], entry["name"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCache(f"array table ({type(exc).__name__})") from None
    view = memoryview(mapped)
    spans.sort(key=lambda span: span[0] - span[1])  # largest first, for an even split
    with ThreadPoolExecutor(max_workers=2) as pool:
        crcs = list(pool.map(lambda span: zlib.crc32(view[span[0]:span[1]]), spans))
    for (_, _, expected, name), got in zip(spans, crcs):
        if got != expected:
            raise CorruptCache(f"array {name} checksum")
    position = data_start
    for start, end, _, _ in sorted(spans):
        if start != position:
            raise CorruptCache("arrays overlap or leave a gap")
        position = end
    if position != size:
        raise CorruptCache("data not covered by the array table")
    return arrays, meta


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
