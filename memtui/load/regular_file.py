"""Opening a snapshot as a regular file, and telling its compression by its first bytes,
importing nothing heavy: the command line opens the file it names this way before numpy and
the readers are imported (memtui/load/ahead.py), as the readers do after them."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
    b"BZh": "bz2",
    b"\x28\xb5\x2f\xfd": "zstd",
}


class NotRegularFile(OSError):
    """The path names a pipe, a device or a socket, which cannot be read by offset or twice."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(f"{path}: not a regular file")
        self.mode = mode


def open_regular_file(path: str | os.PathLike, buffering: int = -1) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; NotRegularFile if not.

    The open does not wait for a writer: a named pipe without one would otherwise hang it
    for good (O_NONBLOCK), and the type is checked on what was opened, not on the name.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(os.fspath(path), mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb", buffering=buffering)


def not_a_file_message(path: str, mode: int) -> str:
    if stat.S_ISFIFO(mode):
        kind = "a pipe"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    else:
        kind = "a socket or other special file"
    return (f"{path}: {kind}, not a regular file: memtui reads a snapshot by offset and more than once; save it to a "
            "file first (it reads .gz, .xz, .bz2 and .zst files itself, no need to decompress them)")
