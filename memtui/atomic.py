"""Writing a file so that it is either complete or absent.

The content goes to a temporary file in the target's own directory (so the final
rename never crosses file systems), is flushed and fsynced, and only then replaces the
target with ``os.replace``. An interrupted or failed write removes the temporary file
and leaves any existing target untouched. Exports, conversions, caches and recordings
all write through here. A process killed mid-write (SIGKILL, power loss) cannot clean
up: its temporary file carries its host and pid, and the next write into that folder
removes it once that process is gone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
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


def _host_name() -> str:
    """The host's name as socket.gethostname gives it: on POSIX that is uname's node name,
    read here without importing socket (and its selectors) at every start."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()

# Temporary files are named after the host and process that write them, so a later run
# can tell one left by a killed process (remove it) from one still being written by a
# live process, on this machine or another sharing the folder (leave it).
@cache
def _host_tag() -> str:
    """Eight hex digits of the host's name (hashlib loads OpenSSL: asked for only when a file is written)."""
    import hashlib

    return hashlib.sha1(_host_name().encode(errors="replace")).hexdigest()[:8]


_TEMP_NAME = re.compile(r"^\..*\.memtui-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[a-z0-9_]+\.partial$")


# The temporary files this process is writing now, so that a forced exit (os._exit after
# a signal the main thread could not act on in time) can remove them first.
_being_written: set[str] = set()


def make_temp_file(path: str | os.PathLike) -> tuple[int, str]:
    """An open descriptor and the name of a new temporary file next to ``path``, after
    removing the ones killed memtui processes left in that folder. The caller renames or
    removes it, then calls :func:`temp_file_done`."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    remove_orphaned_temp_files(directory)
    prefix = f".{os.path.basename(path)}.memtui-{_host_tag()}-{os.getpid()}-"
    import tempfile  # here: it imports shutil and random, which only a write needs

    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".partial", dir=directory)
    _being_written.add(tmp)
    return fd, tmp


def temp_file_done(tmp: str) -> None:
    """``tmp`` (from :func:`make_temp_file`) was renamed into place or removed."""
    _being_written.discard(tmp)


def remove_temp_files_being_written() -> None:
    """Remove every temporary file this process is still writing: it is about to end
    without the writers' own clean-up (os._exit). Safe from any thread, never raises."""
    for tmp in list(_being_written):
        remove_quietly(tmp)
        _being_written.discard(tmp)


def remove_orphaned_temp_files(directory: str | os.PathLike) -> list[str]:
    """Delete the temporary files in ``directory`` whose writer, a memtui process on this
    host, is gone; returns their paths. Anything else is left alone."""
    return _remove_temp_files(directory, lambda pid: not _process_alive(pid))


def remove_own_temp_files(directory: str | os.PathLike) -> list[str]:
    """Delete the temporary files this process is writing in ``directory`` (its writers are
    being abandoned as the process ends); returns their paths."""
    return _remove_temp_files(directory, lambda pid: pid == os.getpid())


def _remove_temp_files(directory: str | os.PathLike, writer_matches: Callable[[int], bool]) -> list[str]:
    """Delete this host's temporary files in ``directory`` whose writer's pid ``writer_matches``."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None or match["host"] != _host_tag() or not writer_matches(int(match["pid"])):
            continue
        full = os.path.join(directory, name)
        try:
            os.unlink(full)
        except OSError:
            continue
        removed.append(full)
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing it
    if os.name != "posix":
        return True  # no harmless way to ask; never remove what might be in use
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def check_writable_target(path: str | os.PathLike, force: bool = False, source: str | os.PathLike | None = None) -> str:
    """Fail early, with one line, if ``path`` cannot be written, or is ``source``, the file
    the output is made from (``--force`` or not: writing it would lose what it is made of);
    returns it as a str."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory")
    if source is not None and _same_file(path, os.fspath(source)):
        raise UsageError(f"{path}: is the file it would be made from; write it elsewhere")
    if not force and os.path.lexists(path):
        raise OutputExistsError(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise WriteError(f"{path}: no such directory {directory}")
    return path


def _same_file(a: str, b: str) -> bool:
    """Whether two names reach one file (a link, another spelling of the path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return os.path.abspath(a) == os.path.abspath(b)


@contextmanager
def atomic_write(path: str | os.PathLike, force: bool = False) -> Iterator[BinaryIO]:
    """Yield a binary file; on normal exit it becomes ``path`` in one step.

    Without ``force`` an existing ``path`` raises :class:`OutputExistsError` before
    anything is written.
    """
    path = check_writable_target(path, force)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = make_temp_file(path)
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
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise WriteError(f"{path}: write failed ({exc.strerror or exc})") from None
        raise
    finally:
        temp_file_done(tmp)
    _fsync_directory(directory)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, force: bool = False) -> None:
    with atomic_write(path, force) as fh:
        fh.write(data)


def remove_quietly(path: str | os.PathLike) -> None:
    """Delete ``path`` if it can be; a file already gone or locked is not an error here."""
    try:
        os.unlink(path)
    except OSError:
        pass


def touch_quietly(path: str | os.PathLike) -> None:
    """Mark ``path`` as just used (its mtime orders cache pruning); failures do not matter."""
    try:
        os.utime(path)
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
