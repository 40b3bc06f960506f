"""One cache file: a fixed header, plain metadata, then every array, page-aligned.

Layout::

    magic (8) | format version (4) | metadata length (8) | metadata crc32 (4) | file length (8)
    metadata: a pickle of plain values only (read with every global refused)
    arrays: raw little-endian data, each at a 4 KiB boundary

The metadata lists each array's name, dtype, shape, offset and crc32. Reading checks all
of it, the crc of every array included, before a single array is handed out: a cache
file is never trusted. Arrays are views of a private (copy-on-write) memory map, so a
warm open costs page faults, not reads, and nothing can write back into the file.
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import struct
import tempfile
import zlib

import numpy as np

from memtui.load.safe_pickle import RestrictedUnpickler

MAGIC = b"MEMTUI\x00C"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIQIQ")
_ALIGN = 4096


class CorruptCache(Exception):
    """The file is not a complete, intact cache file of this version."""


def write_cache_file(path: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over ``path``."""
    table = []
    offset = 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        arrays[name] = array
        table.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "offset": offset,
                      "nbytes": array.nbytes, "crc": zlib.crc32(array)})
        offset += _aligned(array.nbytes)
    meta = dict(meta, arrays=table)
    meta_bytes = pickle.dumps(meta, protocol=4)
    data_start = _aligned(_HEADER.size + len(meta_bytes))
    total = data_start + offset
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes), total)

    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(header)
            out.write(meta_bytes)
            for entry in table:
                out.seek(data_start + entry["offset"])
                out.write(memoryview(arrays[entry["name"]]).cast("B"))
            out.truncate(total)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_cache_file(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, metadata) of a verified cache file; raises CorruptCache otherwise."""
    with open(path, "rb") as fh:
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
            meta = RestrictedUnpickler(io.BytesIO(meta_bytes)).load()
        except Exception as exc:
            raise CorruptCache(f"metadata unreadable ({type(exc).__name__})") from None
        data_start = _aligned(_HEADER.size + meta_len)
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
    arrays = {}
    try:
        for entry in meta["arrays"]:
            dtype = np.dtype(entry["dtype"])
            count = int(np.prod(entry["shape"], dtype=np.int64))
            start = data_start + entry["offset"]
            if dtype.hasobject or count * dtype.itemsize != entry["nbytes"] or start + entry["nbytes"] > size:
                raise CorruptCache(f"array {entry['name']} does not fit")
            array = np.frombuffer(mapped, dtype, count, start).reshape(entry["shape"])
            if zlib.crc32(array) != entry["crc"]:
                raise CorruptCache(f"array {entry['name']} checksum")
            arrays[entry["name"]] = array
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCache(f"array table ({type(exc).__name__})") from None
    return arrays, meta


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
