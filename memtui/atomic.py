"""Writing a file so that it is either complete or absent.

The content goes to a temporary file in the target's own directory (so the final
rename never crosses file systems), is flushed and fsynced, and only then replaces the
target with ``os.replace``. An interrupted or failed write removes the temporary file
and leaves any existing target untouched. Exports, conversions, caches and recordings
all write through here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from memtui.errors import MemtuiError, UsageError


class OutputExistsError(UsageError):
    """The target exists and overwriting it was not asked for."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: already exists (use --force to overwrite)")
        self.path = path


class WriteError(MemtuiError):
    """The output could not be written (no such directory, no permission, disk full)."""


def _current_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def check_writable_target(path: str | os.PathLike, force: bool = False) -> str:
    """Fail early, with one line, if ``path`` cannot be written; returns it as a str."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory")
    if not force and os.path.lexists(path):
        raise OutputExistsError(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise WriteError(f"{path}: no such directory {directory}")
    return path


@contextmanager
def atomic_write(path: str | os.PathLike, force: bool = False) -> Iterator[BinaryIO]:
    """Yield a binary file; on normal exit it becomes ``path`` in one step.

    Without ``force`` an existing ``path`` raises :class:`OutputExistsError` before
    anything is written.
    """
    path = check_writable_target(path, force)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp makes the file private; give it the mode a plain open() would have.
        mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        if not force and os.path.lexists(path):
            raise OutputExistsError(path)  # appeared while we were writing
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError):
            raise WriteError(f"{path}: write failed ({exc.strerror or exc})") from None
        raise
    _fsync_directory(directory)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, force: bool = False) -> None:
    with atomic_write(path, force) as fh:
        fh.write(data)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; not every platform or file system allows it.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
