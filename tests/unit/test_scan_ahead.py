"""The scan started before the imports (memtui/load/ahead.py): the open takes its result only
for the very file it opens and only from a scan that succeeded; anything else leaves the
open to scan by itself, with the same model and the same errors."""

from __future__ import annotations

import json
import lzma
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memtui import cli
from memtui.cache.names import file_part, kept_entry
from memtui.cache.store import ModelCache
from memtui.errors import SnapshotError
from memtui.load import ahead, fast
from memtui.load.changes import file_state
from memtui.model import Snapshot
from memtui.model import actions as act
from memtui.open import open_snapshot
from tests.conftest import uncompressed_sample
from tests.fixtures import variants
from tests.fixtures.model_equality import assert_same_model

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not fast.available(), reason="the compiled scanner is not built")


@pytest.fixture
def snapshot(tmp_path) -> Path:
    return uncompressed_sample(tmp_path)


@pytest.fixture(autouse=True)
def any_file_any_cores(monkeypatch):
    """Small files and this machine's cores are enough to start a scan; none is left over."""
    monkeypatch.setattr(ahead, "_read_by_workers", lambda size: True)
    monkeypatch.setattr(ahead, "MIN_CORES", 1)
    monkeypatch.setenv("MEMTUI_SCAN_THREADS", "4")
    ahead.discard()
    yield
    ahead.discard()


@pytest.fixture
def scans_here(monkeypatch) -> list[str]:
    """The paths the open scanned by itself."""
    calls: list[str] = []
    real = fast._scan_here

    def counted(info, relay):
        calls.append(info.path)
        return real(info, relay)
    monkeypatch.setattr(fast, "_scan_here", counted)
    return calls


def test_the_open_takes_the_scan_started_ahead(snapshot, scans_here):
    want = open_snapshot(snapshot)
    assert scans_here == [str(snapshot)]
    assert ahead.start(str(snapshot))
    got = open_snapshot(snapshot)
    assert scans_here == [str(snapshot)]  # not scanned again
    assert_same_model(got, want)
    open_snapshot(snapshot)  # a second open scans by itself: the scan ahead is taken once
    assert len(scans_here) == 2


@pytest.fixture
def block_pairings(monkeypatch) -> list[tuple]:
    """The start codes of each pairing the model made itself (the blocks' are BLOCK_START)."""
    from memtui.model import snapshot as model_snapshot

    calls: list[tuple] = []
    real = model_snapshot.compute_lifetimes

    def counted(action, addr, size, start, *rest, **options):
        calls.append(start)
        return real(action, addr, size, start, *rest, **options)
    monkeypatch.setattr(model_snapshot, "compute_lifetimes", counted)
    return calls


def _block_pairings_of_an_open(path, block_pairings) -> tuple[Snapshot, int]:
    before = block_pairings.count(act.BLOCK_START)
    snapshot = open_snapshot(path)
    return snapshot, block_pairings.count(act.BLOCK_START) - before


# The sample's second device has a trace of no events, whose addresses the scanner keeps in
# one byte: the model pairs that one itself.
def test_the_model_takes_the_lives_paired_on_the_scan_s_thread(snapshot, block_pairings):
    want, alone = _block_pairings_of_an_open(snapshot, block_pairings)
    assert alone == len(want.devices) == 2
    assert ahead.start(str(snapshot), pair_by=act.BLOCK_ROLE_NAMES)
    got, after_ahead = _block_pairings_of_an_open(snapshot, block_pairings)
    assert after_ahead == 1  # the first device's lives were not paired again
    assert_same_model(got, want)


def test_lives_paired_by_other_actions_than_the_model_s_are_not_taken(snapshot, block_pairings):
    """As for a recording without completions, whose frees' requests end the lives."""
    want, alone = _block_pairings_of_an_open(snapshot, block_pairings)
    start, _, end = act.BLOCK_ROLE_NAMES
    assert ahead.start(str(snapshot), pair_by=(start, (), end))
    got, after_ahead = _block_pairings_of_an_open(snapshot, block_pairings)
    assert after_ahead == alone
    assert_same_model(got, want)


def test_a_role_named_after_more_actions_than_the_pairing_takes_is_left_to_the_model(tmp_path, block_pairings):
    """The scanner numbers action names without a bound; the compiled pairing takes codes
    below 32,768 and took a role's code past that as no action: the file's lives were lost."""
    snap = variants.modern()
    junk = [variants._entry(f"x{i}", 0x7E0000000000 + 4096 * i, 512, 900) for i in range(ahead.PAIRED_CODES)]
    snap["device_traces"][0] = junk + snap["device_traces"][0]
    path = tmp_path / "many_actions.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    want, alone = _block_pairings_of_an_open(path, block_pairings)
    assert ahead.start(str(path), pair_by=act.BLOCK_ROLE_NAMES)
    got, after_ahead = _block_pairings_of_an_open(path, block_pairings)
    assert after_ahead == alone and len(got.devices[0].lives) == len(want.devices[0].lives) > 0
    assert_same_model(got, want)


def test_a_pairing_that_fails_on_the_scan_s_thread_leaves_the_scan(snapshot, scans_here, block_pairings, monkeypatch):
    def fails(result, roles):
        raise MemoryError
    monkeypatch.setattr(ahead, "pair_scanned", fails)
    want, alone = _block_pairings_of_an_open(snapshot, block_pairings)
    assert ahead.start(str(snapshot), pair_by=act.BLOCK_ROLE_NAMES)
    got, after_ahead = _block_pairings_of_an_open(snapshot, block_pairings)
    assert scans_here == [str(snapshot)]  # the scan ahead was taken, and the model paired by itself
    assert after_ahead == alone
    assert_same_model(got, want)


def test_the_model_s_columns_are_built_while_the_scan_s_thread_pairs(snapshot, block_pairings, monkeypatch):
    # The open waited for the pairing too before it built anything (40 ms at 1M on 2 cores).
    import memtui.open

    built = threading.Event()
    columns = memtui.open._model_columns

    def noting(*args):
        built.set()
        return columns(*args)

    pair = ahead.pair_scanned
    seen_while_pairing = []

    def waiting(result, roles):
        seen_while_pairing.append(built.wait(10))  # the columns, built before the pairing ends
        return pair(result, roles)

    want, _ = _block_pairings_of_an_open(snapshot, block_pairings)
    monkeypatch.setattr(memtui.open, "_model_columns", noting)
    monkeypatch.setattr(ahead, "pair_scanned", waiting)
    assert ahead.start(str(snapshot), pair_by=act.BLOCK_ROLE_NAMES)
    got, after_ahead = _block_pairings_of_an_open(snapshot, block_pairings)
    assert seen_while_pairing == [True]
    assert after_ahead == 1  # the lives still taken from the scan's thread
    assert_same_model(got, want)


def test_a_file_changed_after_the_scan_started_is_scanned_again(snapshot, scans_here):
    assert ahead.start(str(snapshot))
    assert ahead._started.finished.wait(30)  # the scan of the file as it was is done
    stat = os.stat(snapshot)
    os.utime(snapshot, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    open_snapshot(snapshot)
    assert scans_here == [str(snapshot)]


def test_a_file_the_scanner_hands_over_gets_the_open_s_own_error(tmp_path, scans_here):
    path = tmp_path / "list.pickle"
    path.write_bytes(pickle.dumps(list(range(1000)), protocol=4))
    with pytest.raises(SnapshotError) as alone:
        open_snapshot(path)
    assert ahead.start(str(path))
    with pytest.raises(SnapshotError) as after_ahead:
        open_snapshot(path)
    assert str(after_ahead.value) == str(alone.value)


def test_progress_is_told_while_waiting_and_a_cancel_stops_the_scan(snapshot, monkeypatch):
    monkeypatch.setattr(ahead, "WAIT_STEP_S", 0.001)
    real_scan = ahead._Scan._run

    def slow(scan):  # long enough for the open to wait on it
        time.sleep(0.2)
        real_scan(scan)
    monkeypatch.setattr(ahead._Scan, "_run", slow)
    assert ahead.start(str(snapshot))
    scan = ahead._started
    told = []

    def cancel(stage, done, total):
        told.append((stage, total))
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        ahead.take(str(snapshot), file_state(snapshot), cancel)
    assert told == [("reading", os.path.getsize(snapshot))]
    assert scan.finished.wait(10)
    assert scan.result is None


def test_a_scan_nobody_takes_is_stopped(snapshot, monkeypatch):
    gate = threading.Event()
    real_scan = ahead._Scan._run

    def held(scan):  # the scan waits here until it has been told to stop
        gate.wait(10)
        real_scan(scan)
    monkeypatch.setattr(ahead._Scan, "_run", held)
    assert ahead.start(str(snapshot))
    scan = ahead._started
    ahead.discard()
    gate.set()
    assert scan.finished.wait(30)
    assert scan.result is None and ahead._started is None
    assert ahead.take(str(snapshot), file_state(snapshot)) is None


def test_no_compressed_file_starts_a_scan_however_large(tmp_path, monkeypatch):
    """The scan wants a pickle's PROTO (0x80) first, which no compression's magic starts with."""
    from memtui.load.regular_file import MAGIC

    monkeypatch.setattr(ahead, "_read_by_workers", lambda size: True)
    for i, magic in enumerate(MAGIC):
        path = tmp_path / f"compressed{i}"
        path.write_bytes(magic + b"\0" * 64)
        assert not ahead.start(str(path))
    assert ahead._started is None


def test_nothing_starts_where_the_open_would_not_scan_on_many_cores(tmp_path, snapshot, monkeypatch):
    compressed = tmp_path / "s.pickle.xz"
    compressed.write_bytes(lzma.compress(snapshot.read_bytes()))
    text = tmp_path / "notes.txt"
    text.write_text("not a pickle")
    assert not ahead.start(str(compressed))
    assert not ahead.start(str(text))
    assert not ahead.start(str(tmp_path))
    assert not ahead.start(str(tmp_path / "missing.pickle"))
    monkeypatch.setattr(ahead, "_read_by_workers", lambda size: False)
    assert not ahead.start(str(snapshot))
    monkeypatch.setattr(ahead, "_read_by_workers", lambda size: True)
    monkeypatch.setattr(ahead, "MIN_CORES", 5)
    assert not ahead.start(str(snapshot))
    monkeypatch.setattr(ahead, "MIN_CORES", 1)
    monkeypatch.setenv("MEMTUI_NO_NATIVE", "1")
    assert not ahead.start(str(snapshot))
    monkeypatch.delenv("MEMTUI_NO_NATIVE")
    assert not ahead.start(str(snapshot), unless=lambda: True)
    assert ahead.start(str(snapshot), unless=lambda: False)
    assert not ahead.start(str(snapshot))  # one at a time


def test_a_file_is_scanned_ahead_only_if_the_scanner_reads_it_with_workers(monkeypatch):
    """Smaller, it reads in order holding the GIL, and the imports would wait for it."""
    from memtui import _native

    monkeypatch.undo()  # the rule itself, not the fixture's stand-in
    min_range = _native._parallel_limits()[1]
    assert not ahead._read_by_workers(2 * min_range - 1)
    assert ahead._read_by_workers(2 * min_range)
    assert _native._parallel_limits()[1] == min_range  # asking changed nothing


@pytest.fixture
def started(monkeypatch) -> list[str]:
    calls: list[str] = []
    def start(path, unless=None, pair_by=None):
        assert pair_by == act.BLOCK_ROLE_NAMES  # the scan's thread pairs as the model would
        if unless is None or not unless():
            calls.append(path)
        return False
    monkeypatch.setattr(ahead, "start", start)
    return calls


@pytest.mark.parametrize("words", [
    ["{f}"], ["info", "{f}"], ["info", "--json", "{f}"], ["--no-cache", "oom", "{f}", "--json"],
    ["export", "{f}", "-o", "out.msgpack"], ["diff", "--at-a", "3", "{f}", "{f}"],
])
def test_the_command_line_scans_the_snapshot_a_command_names(snapshot, tmp_path, started, words):
    cli._scan_ahead([w.format(f=snapshot) for w in words] + ["--cache-dir", str(tmp_path / "cache")])
    assert started == [str(snapshot)]


@pytest.mark.parametrize("words", [
    ["run", "{f}"], ["serve", "{f}"], ["mcp", "{f}"], ["watch", "{f}"], ["ranks", "{f}"], ["info"], ["--help"],
    ["info", "missing.pickle"], [], ["info", "{f}", "--help"], ["{f}", "-h"], ["info", "{f}", "--he"],
])
def test_nor_where_it_would_not_open_that_file(snapshot, tmp_path, started, words):
    cli._scan_ahead([w.format(f=snapshot) for w in words])
    assert started == []


def test_nor_where_the_cache_keeps_a_model_of_it(snapshot, tmp_path, started):
    folder = tmp_path / "cache"
    cli._scan_ahead(["info", str(snapshot), "--cache-dir", str(folder)])
    cache = ModelCache(str(folder))
    cache.store(snapshot, open_snapshot(snapshot))
    assert kept_entry(str(folder), snapshot) is not None
    cli._scan_ahead(["info", str(snapshot), "--cache-dir", str(folder)])
    cli._scan_ahead(["--cache-dir", str(folder), "info", str(snapshot)])
    cli._scan_ahead(["info", str(snapshot), f"--cache-dir={folder}"])
    assert started == [str(snapshot)]  # the first, before the model was kept
    cli._scan_ahead(["info", str(snapshot), "--cache-dir", str(folder), "--no-cache"])
    assert started == [str(snapshot)] * 2


def test_the_cache_names_an_entry_by_the_file_then_the_schema(snapshot, tmp_path):
    cache = ModelCache(str(tmp_path / "cache"))
    key = cache.key(snapshot)
    assert key.startswith(file_part(snapshot)) and len(key) == 40
    cache.store(snapshot, open_snapshot(snapshot))
    assert os.listdir(cache.folder) == [key + ".mtc"]
    other = tmp_path / "other.pickle"
    other.write_bytes(snapshot.read_bytes() + b"\0")
    assert kept_entry(cache.root, snapshot) is not None and kept_entry(cache.root, other) is None
    assert kept_entry(str(tmp_path / "nowhere"), snapshot) is None


def test_the_early_modules_import_no_numpy():
    code = ("import sys; import memtui.cli, memtui.load.ahead, memtui.cache.names, memtui.model.actions; "
            "sys.exit('numpy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


# What the scan waits for is imported before it starts: the readers, the model cache and
# what they import (0.03-0.05 s of each cold open, one core busy) come after it.
LATER = ["memtui.load.source", "memtui.load.limits", "memtui.load.read", "memtui.cache.store", "memtui.atomic",
         "logging", "dataclasses", "pickletools", "bz2", "lzma", "gzip"]


def test_the_scan_starts_before_the_readers_and_the_cache_are_imported():
    code = ("import sys, json; import memtui.cli, memtui.load.ahead, memtui.cache.names, memtui.model.actions; "
            f"print(json.dumps([m for m in {LATER!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


# What a cold ``info`` does without, each imported where it is used: the log lines of a
# failure worked around, the cache's hashes and JSON, the decompressors of other files, a
# pool of concurrent.futures (which imports logging). On 2 cores they were 6% of a cold
# 1M-event ``info``'s time.
NOT_FOR_A_COLD_INFO = ["logging", "concurrent.futures", "hashlib", "json", "gzip", "bz2", "lzma"]


def test_a_cold_info_imports_only_what_it_uses(snapshot):
    command = ["info", "--no-cache", str(snapshot)]
    code = ("import sys, io, contextlib\nfrom memtui import cli\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    code = cli.main({command!r})\n"
            f"print(code, [m for m in {NOT_FOR_A_COLD_INFO!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 1) == ["0", "[]\n"]


# What each command needs besides its snapshot to open it.
MORE_WORDS = {"stack": ["0x0"], "diff": ["{f}"], "export": ["-o", "{out}"]}


def test_every_command_that_is_sent_a_scan_takes_it(snapshot, tmp_path, monkeypatch, capsys):
    taken = []
    real_take = ahead.take

    def recorded(path, state, progress=None):
        result = real_take(path, state, progress)
        taken.append(result is not None)
        return result
    monkeypatch.setattr(ahead, "take", recorded)
    for name in cli.command_names():
        if name in cli.READ_OTHERWISE:
            continue
        taken.clear()
        words = [name, str(snapshot)] + [w.format(f=snapshot, out=tmp_path / f"{name}.msgpack")
                                         for w in MORE_WORDS.get(name, [])]
        cli.main(words + ["--no-cache"])
        assert taken[:1] == [True], name
        assert ahead._started is None
    capsys.readouterr()


LIMITED_START = """
import os, resource, sys
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
from memtui.load import ahead
ahead._read_by_workers = lambda size: True
print(ahead.start(sys.argv[1]))
"""


def test_no_scan_starts_under_a_limit_of_the_address_space(snapshot):
    """Its threads reserve address space while numpy is imported: under a tight limit the
    imports, or the open's own read, failed where they did not without it."""
    import resource

    if any(resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA)):
        pytest.skip("this process already runs under such a limit")
    env = dict(os.environ, MEMTUI_SCAN_THREADS="4")
    said = {limit: subprocess.run([sys.executable, "-c", LIMITED_START, str(snapshot), str(limit)], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=60).stdout.strip()
            for limit in (0, 16 << 30)}
    assert said == {0: "True", 16 << 30: "False"}


def test_a_head_start_that_fails_leaves_the_command_as_it_was(snapshot, monkeypatch, capsys):
    def cannot_start(self):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(threading.Thread, "start", cannot_start)
    with pytest.raises(RuntimeError):
        ahead.start(str(snapshot))
    assert ahead._started is None  # nothing for an open to wait on
    monkeypatch.undo()

    def failing(path, unless=None):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(ahead, "start", failing)
    assert cli.main(["info", str(snapshot), "--no-cache"]) == 0
    assert "oom_training.pickle" in capsys.readouterr().out


def test_a_rewrite_that_sets_the_modification_time_back_is_scanned_again(snapshot, scans_here):
    assert ahead.start(str(snapshot))
    assert ahead._started.finished.wait(30)
    before = os.stat(snapshot)
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = b"\xff" * 64
    snapshot.write_bytes(bytes(data))
    os.utime(snapshot, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_state(snapshot) == file_state(snapshot) and os.stat(snapshot).st_mtime_ns == before.st_mtime_ns
    try:
        open_snapshot(snapshot)
    except SnapshotError:
        pass  # the open's own answer on the bytes as they are now
    assert scans_here == [str(snapshot)]


def test_an_open_that_reads_without_the_scanner_stops_the_scan(snapshot, tmp_path):
    compressed = tmp_path / "other.pickle.xz"
    compressed.write_bytes(lzma.compress(snapshot.read_bytes()))
    assert ahead.start(str(snapshot))  # the command line's guess: not the file opened
    open_snapshot(compressed)
    assert ahead._started is None


def test_a_pipe_is_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert not ahead.start(str(fifo))
    assert time.monotonic() - started < 5


def test_the_progress_ends_at_the_whole_file_and_the_rate_counts_from_the_first_report(snapshot, monkeypatch):
    from memtui.commands import _common

    assert ahead.start(str(snapshot))
    told = []
    assert ahead.take(str(snapshot), file_state(snapshot), lambda *a: told.append(a)) is not None
    assert told[-1] == ("reading", os.path.getsize(snapshot), os.path.getsize(snapshot))
    clock = iter([10.0, 10.5])
    monkeypatch.setattr(_common.time, "monotonic", lambda: next(clock))
    written = []
    monkeypatch.setattr(_common.sys, "stderr", type("W", (), {"write": written.append, "flush": lambda self: None})())
    shown = _common.StderrProgress()
    shown("reading", 900_000_000, 1_000_000_000)  # a scan started before the display: far on already
    shown("reading", 950_000_000, 1_000_000_000)
    assert "100.0 MB/s" in written[-1]  # 50 MB in half a second, not 950


def test_a_file_rewritten_while_the_open_waits_for_the_scan_is_scanned_again(snapshot, scans_here, monkeypatch):
    """The change time is compared again once the scan is done: a rewrite during the wait
    that sets the modification time back is not answered from the bytes the scan read."""
    assert ahead.start(str(snapshot))
    seen = iter([os.stat(snapshot).st_ctime_ns, os.stat(snapshot).st_ctime_ns + 1])  # at the take, after the wait
    monkeypatch.setattr(ahead, "_changed_ns", lambda path: next(seen))
    assert ahead.take(str(snapshot), file_state(snapshot)) is None


def test_the_rate_counts_again_from_a_reading_begun_again(monkeypatch):
    """A scan ahead thrown away after the open waited on it: the open reads from the start."""
    from memtui.commands import _common

    clock = iter([10.0, 10.3, 10.6, 11.1])
    monkeypatch.setattr(_common.time, "monotonic", lambda: next(clock))
    written = []
    monkeypatch.setattr(_common.sys, "stderr", type("W", (), {"write": written.append, "flush": lambda self: None})())
    shown = _common.StderrProgress()
    shown("reading", 900_000_000, 1_000_000_000)
    shown("reading", 980_000_000, 1_000_000_000)
    shown("reading", 0, 1_000_000_000)  # begun again
    shown("reading", 500_000_000, 1_000_000_000)
    assert "1000.0 MB/s" in written[-1] and "0 s left" in written[-1]  # 500 MB in half a second
