"""The compiled scan of the snapshot a command names, started before numpy and the analyses
are imported.

On a host of many cores the scan of a large uncompressed pickle takes about as long as
starting memtui does (numpy, the model, the analyses: 0.1-0.15 s), and it needs none of
them: started first, on a thread of its own, it runs while they are imported, and the open
that follows (memtui/load/fast) takes its result instead of scanning again.

It is only a head start. The open decides everything as it always does: it takes the
result only for the very file it opens (same file, size, modification and change times as
when the scan started) and only from a scan that finished; whatever else happened (a file the
scanner hands over, a change to the file, an error, a scan never asked for) leaves the open
to scan by itself, so every answer and every error is the one the open alone gives.

When the caller names the actions that start, request the end of and end an allocation,
the scan's thread also pairs each trace's allocations with their frees once the scan is done
(the compiled pairing the model uses, src/memtui_native/lifetimes.c): on a few cores the scan
ends before the imports do, and a core would otherwise wait for them. The model takes these
lives only where it would pair by the same actions (memtui/open.py).

Nothing here imports numpy (a test watches it): the command line calls :func:`start` before
anything heavy is imported.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from memtui.compiled import native as _native  # None without a C compiler: nothing to start
from memtui.cores import pairing_threads, usable_cores
from memtui.load.changes import FileState, state_of
from memtui.load.regular_file import open_regular_file

# Measured (docs/performance.md): from 2 cores the imports run beside the scan's threads
# (`info --no-cache` at 1M events 0.94x on a 2-core machine, 0.71-0.95x on 2 to 16 cores of
# the GPU hosts; at 10M 1.01x on the 2-core machine, 0.89-0.94x on the hosts); on one core
# the scan reads in order holding the GIL, and the imports would wait for it.
MIN_CORES = 2
WAIT_STEP_S = 0.05  # how often a progress callback hears from a scan it waits for


def scan_threads() -> int:
    """Cores the scanner may use: those this process may run on (``MEMTUI_SCAN_THREADS``
    overrides; 1 reads in order)."""
    wanted = os.environ.get("MEMTUI_SCAN_THREADS")
    if wanted and wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    return usable_cores()


def _memory_limited() -> bool:
    """Whether the process runs under a limit of its address space or data (``ulimit -v``):
    the scan's threads, their stacks and pools reserve address space while numpy is imported,
    and under a tight limit the imports or the open's own read would fail where they did not
    without it (docs/reliability.md)."""
    try:
        import resource
    except ImportError:  # not on a POSIX system: no such limits
        return False
    limits = [getattr(resource, name, None) for name in ("RLIMIT_AS", "RLIMIT_DATA")]
    return any(resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in limits if r is not None)


def worth_a_thread(threads: int | None = None) -> bool:
    """Whether work begun before the imports may run beside them: on one core it would only
    take turns with them, and under a limit of the address space its threads' reservations
    could make the imports fail. ``threads``: the cores the work may use (else the process's)."""
    return (usable_cores() if threads is None else threads) >= MIN_CORES and not _memory_limited()


def _read_by_workers(size: int) -> bool:
    """Whether the scanner reads a file of ``size`` bytes with workers: two ranges of its
    smallest (src/memtui_native/parallel.c, MIN_RANGE: 32 MB). A smaller file it reads in
    order on the calling thread, holding the GIL, and the imports it was to run beside would
    wait for it."""
    min_range = _native._parallel_limits()[1]  # called without arguments, it changes nothing
    return size >= 2 * min_range


# The roles of the actions in a pairing: the names that start, request the end of, and end a life.
Roles = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
# The compiled pairing takes action codes below this (int16); the scanner numbers a file's
# action names without a bound, and one named after 32,767 others would be paired as no action.
PAIRED_CODES = 1 << 15
# The scanner's integer columns as memoryview formats, by the width in bytes it gives for each.
_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}


PAIRED_COLUMNS = ("action", "addr", "size", "rows")  # what pair_scanned reads of a trace


def pair_scanned(result: dict, roles: Roles) -> list[tuple | None]:
    """Each trace of the scanner's ``result`` paired by ``roles`` (the compiled pairing's
    own result, for memtui.model.lifetimes.from_native_pairing), or None for a trace whose
    addresses the scanner kept narrower than 64 bits (the pairing takes int64 addresses: the
    model widens them first, and pairs such a trace itself)."""
    ids = {name: i for i, name in enumerate(result["actions"])}
    codes = [tuple(ids[name] for name in names if name in ids) for names in roles]
    if any(code >= PAIRED_CODES for role in codes for code in role):
        return [None] * len(result["traces"])  # the model's own codes always fit: it pairs by them
    paired: list[tuple | None] = []
    for trace in result["traces"]:
        if trace["addr"][1] != 8:
            paired.append(None)
            continue
        action, addr, size = (memoryview(trace[name][0]).cast(_FORMATS[trace[name][1]])
                              for name in ("action", "addr", "size"))
        paired.append(_native.lifetimes(action, addr, size, *codes, pairing_threads(trace["rows"])))
    return paired


class Pairing:
    """The scan's thread's pairing of each trace's allocations with their frees, made after
    the scan's columns are handed over: the model is built from them meanwhile and waits
    for the pairing only where it needs the lives (on 2 cores at a million events the
    pairing was 40 ms the model's building waited for, doing nothing)."""

    def __init__(self, roles: Roles) -> None:
        self.roles = roles
        self._paired: list[tuple | None] | None = None
        self._done = threading.Event()

    def finish(self, paired: list[tuple | None] | None) -> None:
        self._paired = paired
        self._done.set()

    def finish_unless_done(self) -> None:
        if not self._done.is_set():
            self.finish(None)

    def result(self) -> list[tuple | None] | None:
        """Each trace's compiled pairing (None for a trace not paired), once made; None
        when the pairing failed or was not made (the model pairs the events itself)."""
        self._done.wait()
        return self._paired


class _Stopped(Exception):
    """Raised into the scanner by its progress callback: the scan is no longer wanted."""


class _Scan:
    """One scan on a thread of its own; ``result`` is the scanner's, or None when it failed."""

    def __init__(self, path: str, state: FileState, changed_ns: int, threads: int, roles: Roles | None) -> None:
        self.path, self.state, self.size, self.threads, self.roles = path, state, state[2], threads, roles
        self.changed_ns = changed_ns  # st_ctime_ns: a rewrite that set the modification time back changes it
        self.done_bytes = 0
        self.result: dict | None = None
        self.scanned = threading.Event()  # the scan's result is ready (its pairing may follow)
        self.finished = threading.Event()  # the thread's work is over, the pairing's too
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="memtui-scan-ahead", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the scan to end at its next report (a few milliseconds), and forget its result."""
        self._stop = True
        self.result = None

    def _progress(self, stage: str, done: int, total: int) -> None:
        self.done_bytes = done
        if self._stop:
            raise _Stopped

    def _run(self) -> None:
        try:
            self._scan_then_pair()
        finally:
            self.finished.set()

    def _scan_then_pair(self) -> None:
        try:
            result = self._scan()
        except Exception:  # noqa: BLE001 - the open scans again and says what is wrong
            result = None
        pairing = None
        if result is not None and self.roles is not None:
            pairing = result["paired"] = Pairing(self.roles)
        if not self._stop:
            self.result = result
        if pairing is None:
            self.scanned.set()
            return
        try:
            # The pairing keeps only the columns it reads: the model frees the others as it
            # builds its own (80 MB more at the peak at 10M when the whole result was kept).
            needed = {"actions": result["actions"],
                      "traces": [{name: trace[name] for name in PAIRED_COLUMNS} for trace in result["traces"]]}
            del result
            self.scanned.set()  # the open takes the columns now; the pairing follows
            pairing.finish(self._paired(needed, pairing.roles))
        finally:
            self.scanned.set()
            pairing.finish_unless_done()  # whatever happened, the model never waits for ever

    def _scan(self) -> dict | None:
        scanner = _native.Scanner()
        with open_regular_file(self.path, buffering=0) as fh:
            st = os.fstat(fh.fileno())  # the file opened is the one looked at, or no scan
            if state_of(st) != self.state or st.st_ctime_ns != self.changed_ns:
                return None
            scanner.scan_file(fh.fileno(), self.size, self.threads, self._progress)
        result: dict = scanner.finish(self.size)
        result["parallel"] = scanner.parallel
        return result  # the scanner's tables go as it returns, before the pairing allocates

    def _paired(self, result: dict, roles: Roles) -> list[tuple | None] | None:
        if self._stop:
            return None
        try:
            return pair_scanned(result, roles)
        except Exception:  # noqa: BLE001 - the model pairs the events itself, and says what is wrong
            return None


_started: _Scan | None = None
_lock = threading.Lock()


def start(path: str, unless: Callable[[], bool] | None = None, pair_by: Roles | None = None) -> bool:
    """Start scanning ``path`` on a thread if the open that follows would scan it with the
    compiled scanner's workers: a regular file, an uncompressed pickle, large enough,
    and ``unless`` (asked last: it may read the file) says no. True when a scan started.
    ``pair_by``: the roles to pair each trace's events by once the scan is done."""
    global _started
    if _native is None or os.environ.get("MEMTUI_NO_NATIVE") or _started is not None:
        return False
    threads = scan_threads()
    if not worth_a_thread(threads):
        return False
    try:
        with open_regular_file(path, buffering=0) as fh:  # a pipe is refused, not waited on
            st = os.fstat(fh.fileno())
            head = fh.read(8)
    except OSError:
        return False
    # PROTO (0x80) starts a pickle of protocol 2 or more, and no compressed file (regular_file.MAGIC)
    if not _read_by_workers(st.st_size) or not head.startswith(b"\x80"):
        return False  # small, compressed, or not a pickle: the open reads it another way
    if unless is not None and unless():
        return False
    scan = _Scan(os.fspath(path), state_of(st), st.st_ctime_ns, threads, pair_by)  # the file opened, as it was then
    scan.start()  # (a thread that cannot start raises, and no scan is kept)
    with _lock:
        _started = scan
    return True


def take(path: str, state: FileState | None,
         progress: Callable[[str, int, int], None] | None = None) -> dict | None:
    """The scanner's result for ``path``, whose state (memtui.load.changes.file_state) the
    open took before reading, if a scan of that very file was started and succeeds; else None
    (and the open scans by itself). Waits for a scan still running, telling ``progress``
    how far it is; what ``progress`` raises (a cancel) stops the scan and goes on up."""
    global _started
    with _lock:
        scan, _started = _started, None
    if scan is None:
        return None
    if state is None or scan.state != state or _changed_ns(path) != scan.changed_ns:
        scan.stop()
        return None
    try:
        while not (scan.scanned.wait(WAIT_STEP_S) or scan.finished.is_set()):
            if progress is not None:
                progress("reading", scan.done_bytes, scan.size)
    except BaseException:
        scan.stop()  # a cancel, Ctrl-C: the scan ends too
        raise
    if scan.result is not None and _changed_ns(path) != scan.changed_ns:
        return None  # rewritten while it was read, its modification time set back
    result, scan.result = scan.result, None  # the open's now: the scan keeps none of it
    if result is not None and progress is not None:
        progress("reading", scan.size, scan.size)  # the whole file read, as the open's own scan ends
    return result


def _changed_ns(path: str) -> int | None:
    try:
        return os.stat(path).st_ctime_ns
    except OSError:
        return None


def discard() -> None:
    """Stop a scan nobody took (a model found in the cache, a command that read otherwise)."""
    global _started
    with _lock:
        scan, _started = _started, None
    if scan is not None:
        scan.stop()
