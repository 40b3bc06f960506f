"""The model cache: a second open of the same snapshot maps its columns instead of decoding.

Files live under ``$XDG_CACHE_HOME/memtui`` (``~/.cache/memtui``), never next to the
snapshot. A snapshot's key is its size, its modification time and a hash of its first
and last MiB, together with the cache format and the model's schema: any change to the
file or to memtui's model gives a new key, so a stale entry is simply never found. A
file that fails verification is deleted and the snapshot is decoded again. Writes are
atomic (temporary file, then rename; no fsync: see fileformat), so two memtui processes
can share the folder.
A folder that cannot be written turns the cache off for that run, with one warning line.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memtui import logs
from memtui.atomic import remove_orphaned_temp_files, remove_own_temp_files, remove_quietly, touch_quietly
from memtui.cache.names import ENTRY_SUFFIX, FORMAT_VERSION, default_cache_dir, entry_key, format_folder
from memtui.cores import run_after_the_answer

# The file format and the model's layout are imported where an entry is read or written,
# not here: a command that reads and writes none (--no-cache) does without them.


KEEP_FILES = 8  # the least recently used files beyond this many are removed
_STALE_TEMP_S = 3600
ABANDON_WAIT_S = 2.0  # how long a process ending on a signal waits for its writers to clean up


# Background writes not yet waited for nor abandoned, each as the event its writer sets when
# it ends: the interpreter waits for them at exit, as it would for threads that are not
# daemons. Events rather than Thread.join: a join interrupted by Ctrl-C marks the thread
# as stopped while it still runs (CPython 3.11), and nothing could wait for it after that.
_unfinished: set[threading.Event] = set()


@atexit.register
def _finish_writes() -> None:
    for done in list(_unfinished):
        _wait_for(done)


def _wait_for(done: threading.Event) -> None:
    """Wait for ``done`` a moment at a time: a signal the kernel hands to another thread (a
    writer, a library's) sets Python's flag but wakes only that thread, and a wait with no
    end would never return to see it (under load, a Ctrl-C waited for a stalled write)."""
    while not done.wait(0.05):
        pass


def beside_entry(cache: ModelCache | None, source, name: str) -> str | None:
    """The path of a file kept beside ``source``'s model entry (``<key>.<name>``: pruned with
    it), or None where there is no cache to use or ``source`` cannot be read."""
    if cache is None or cache.disabled or not isinstance(source, (str, os.PathLike)):
        return None
    try:
        return os.path.join(cache.folder, f"{cache.key(source)}.{name}")
    except OSError:
        return None


def _stderr_warning(message: str) -> None:
    print(f"memtui: {message}", file=sys.stderr)


class ModelCache:
    """Load and store built models for snapshot files."""

    def __init__(self, folder: str | None = None, warn: Callable[[str], None] = _stderr_warning) -> None:
        self.root = os.path.abspath(folder or default_cache_dir())
        self.folder = format_folder(self.root)
        self._warn = warn
        self.disabled = False
        self._writers: list[threading.Event] = []  # set by each background writer as it ends
        self._abandoned = threading.Event()
        self._holds = 0  # while above zero, background writes wait in _pending (see hold_writes)
        self._pending: list[Callable[[], None]] = []  # writes held back, each a task
        self._lock = threading.Lock()
        # The explorer sets it: its writes then run below the thread that draws the screen
        # (memtui.cores.run_after_the_answer). A command's are left as they are: the command
        # ends once they are done, so a busy machine would only keep it longer.
        self.writes_after_the_answer = False

    def key(self, path: str | os.PathLike) -> str:
        from memtui.cache.layout import schema_signature

        return entry_key(path, schema_signature())

    def path_for(self, path: str | os.PathLike) -> str:
        return os.path.join(self.folder, self.key(path) + ENTRY_SUFFIX)

    def load(self, path: str | os.PathLike):
        """The cached Snapshot of ``path``, or None (absent, stale, corrupt or unreadable)."""
        if self.disabled:
            return None
        from memtui.cache.fileformat import CorruptCache, read_cache_file
        from memtui.cache.layout import put_together

        try:
            entry = self.path_for(path)
        except OSError:
            return None  # the snapshot itself is unreadable: the loader says why
        if not os.path.exists(entry):
            return None
        try:
            arrays, meta = read_cache_file(entry)
            if meta.get("key") != os.path.basename(entry)[:-len(ENTRY_SUFFIX)]:
                raise CorruptCache("written for another snapshot")
            snapshot = put_together(arrays, meta, os.fspath(path))
        except (CorruptCache, KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            logs.info(logs.CACHE, "cache file %s rejected (%s); rebuilding", entry, exc)
            remove_quietly(entry)
            return None
        except OSError as exc:
            logs.info(logs.CACHE, "cache file %s unreadable (%s)", entry, exc)
            return None
        touch_quietly(entry)
        return snapshot

    def check_writable(self) -> bool:
        """Make the folder if needed; turn the cache off (one warning) if it cannot be written."""
        try:
            os.makedirs(self.folder, exist_ok=True)
            if not os.access(self.folder, os.W_OK):
                raise PermissionError(13, "not writable")
        except OSError as exc:
            self._disable(exc)
            return False
        remove_orphaned_temp_files(self.folder)  # left by a memtui killed while writing here
        return True

    def store(self, path: str | os.PathLike, snapshot, background: bool = False) -> None:
        """Write ``snapshot`` for ``path``; in a thread when ``background`` (see :meth:`wait`)."""
        if self.disabled:
            return
        if not self.check_writable():
            return
        try:
            entry = self.path_for(path)
        except OSError:
            return
        if background:
            self.write_later(lambda: self._write(entry, snapshot))
        else:
            self._write(entry, snapshot)

    def write_later(self, task: Callable[[], None]) -> None:
        """Run ``task`` (a write into this cache's folder, through memtui.atomic) in a
        background writer, held back like the model's own writes (:meth:`hold_writes`)."""
        if self.disabled:
            return
        with self._lock:
            if self._holds:
                self._pending.append(task)
                return
        self._start_writer(task)

    def hold_writes(self) -> None:
        """Keep background writes from starting until :meth:`release_writes`: the first
        answer (a command's output, the explorer's first screen) is not shared with the
        write, which takes a core and the GIL's turns. Holds nest."""
        with self._lock:
            self._holds += 1

    def release_writes(self) -> None:
        """End one :meth:`hold_writes`; the last one starts the writes stored meanwhile."""
        with self._lock:
            self._holds = max(0, self._holds - 1)
            if self._holds:
                return
            pending, self._pending = self._pending, []
        for task in pending:
            self._start_writer(task)

    @contextmanager
    def writes_held(self) -> Iterator[None]:
        """:meth:`hold_writes` for the block; the writes start as it ends, unless abandoned."""
        self.hold_writes()
        try:
            yield
        finally:
            self.release_writes()

    def _start_writer(self, task: Callable[[], None]) -> None:
        if self._abandoned.is_set():
            return
        # A daemon, so that a process ending on a signal can abandon it (see abandon)
        # rather than wait; every other end waits for it: wait(), or at exit.
        done = threading.Event()
        self._writers.append(done)
        _unfinished.add(done)
        threading.Thread(target=self._write_in_background, args=(task, done),
                         name="memtui-cache-writer", daemon=True).start()

    def wait(self) -> None:
        """Start the writes still held back, and wait for every background write to finish."""
        with self._lock:
            self._holds = 0
        self.release_writes()
        for done in self._writers:
            _wait_for(done)
            _unfinished.discard(done)
        self._writers.clear()

    def abandon(self, wait_s: float = ABANDON_WAIT_S) -> None:
        """Stop the background writes, leaving no temporary file behind: the process is
        ending on a signal. Each writer stops at its next piece and removes its file; one
        still busy after ``wait_s`` (a write to a slow disk) has its file removed here,
        so what it writes afterwards goes nowhere."""
        self._abandoned.set()
        with self._lock:
            self._pending.clear()  # never started: nothing of them is on disk
        deadline = time.monotonic() + wait_s
        finished = all([done.wait(max(0.0, deadline - time.monotonic())) for done in self._writers])
        if not finished:
            remove_own_temp_files(self.folder)
        for done in self._writers:
            _unfinished.discard(done)
        self._writers.clear()

    def stopping(self) -> bool:
        """Whether the writes are being abandoned (the process ends on a signal): a writer
        asks between pieces and stops, leaving no file."""
        return self._abandoned.is_set()

    def _write_in_background(self, task: Callable[[], None], done: threading.Event) -> None:
        if self.writes_after_the_answer:
            run_after_the_answer()
        try:
            if not self._abandoned.is_set():
                task()
        except Exception as exc:  # noqa: BLE001 - a cache write never takes the program down
            logs.info(logs.CACHE, "cache write failed: %s", exc)
        finally:
            _unfinished.discard(done)
            done.set()

    def _write(self, entry: str, snapshot) -> None:
        if self._abandoned.is_set():
            return
        from memtui.cache.fileformat import WriteStopped, write_cache_file
        from memtui.cache.layout import take_apart

        arrays, meta = take_apart(snapshot)
        meta["key"] = os.path.basename(entry)[:-len(ENTRY_SUFFIX)]
        try:
            write_cache_file(entry, arrays, meta, stop=self._abandoned.is_set)
        except WriteStopped:
            return
        except OSError as exc:
            if not self._abandoned.is_set():  # an abandoned write's file removed under it is no news
                self._disable(exc)
            return
        self._prune(keep=entry)

    def _disable(self, exc: OSError) -> None:
        if not self.disabled:
            self.disabled = True
            reason = exc.strerror or str(exc)
            self._warn(f"model cache off: cannot write to {self.folder} ({reason})")

    def _prune(self, keep: str) -> None:
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        now = time.time()
        entries = []
        for name in names:
            full = os.path.join(self.folder, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if name.startswith(".tmp-"):
                if now - st.st_mtime > _STALE_TEMP_S:  # left by a process that was killed
                    remove_quietly(full)
            elif name.endswith(ENTRY_SUFFIX) and full != keep:
                entries.append((st.st_mtime, full))
        for _, full in sorted(entries, reverse=True)[KEEP_FILES - 1:]:
            remove_quietly(full)
        try:
            kept = {name[:-len(ENTRY_SUFFIX)] for name in os.listdir(self.folder) if name.endswith(ENTRY_SUFFIX)}
        except OSError:
            return
        for name in names:  # what is kept beside an entry (the explorer's curves) goes with it
            if not name.startswith(".") and not name.endswith(ENTRY_SUFFIX) and name.split(".", 1)[0] not in kept:
                remove_quietly(os.path.join(self.folder, name))
        self._remove_older_formats()

    def _remove_older_formats(self) -> None:
        """The folders of the cache formats before this one (``v<N>``): no memtui that writes
        this format reads them, and a 10M-event entry is hundreds of megabytes. Only their
        plain files, and only older formats: a newer memtui's cache beside this one is left
        alone."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if not (name[:1] == "v" and name[1:].isdigit() and int(name[1:]) < FORMAT_VERSION):
                continue
            old = os.path.join(self.root, name)
            if os.path.islink(old) or not os.path.isdir(old):
                continue
            try:
                inside = os.listdir(old)
            except OSError:
                continue
            for file in inside:
                full = os.path.join(old, file)
                if os.path.isfile(full) and not os.path.islink(full):
                    remove_quietly(full)
            try:
                os.rmdir(old)
            except OSError:
                pass  # something else in it: left as it is


