"""The explorer's snapshot opened before Textual is imported (memtui/tui/early_load.py): the
app shows what it made, the progress made before the loading screen came, its errors as
one line, a quit while it runs; the cache is written after the first screen, as always."""

from __future__ import annotations

import os
import threading

import numpy as np

from memtui.cache.store import ModelCache
from memtui.errors import SnapshotError
from memtui.open import open_snapshot
from memtui.tui.app import MemtuiApp
from memtui.tui.early_load import EarlyLoad
from memtui.tui.screens.main import MainScreen
from tests.fixtures.tiny_snapshot import write_tiny_snapshot
from tests.tui.helpers import screens_writes_start_on


async def _settle(app, pilot, done) -> None:
    for _ in range(200):
        if done():
            return
        await pilot.pause(0.05)


async def test_the_app_shows_the_model_and_view_the_early_open_made(tmp_path):
    path = write_tiny_snapshot(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"))
    started_on = screens_writes_start_on(cache, lambda: app)
    started = EarlyLoad(path, None, cache)
    app = MemtuiApp(path, cache=cache, started=started)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot, lambda: isinstance(app.screen, MainScreen) and started_on)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        shown = screen.snapshot.devices[0]
        want = open_snapshot(path).devices[0]
        assert np.array_equal(shown.trace.addr, want.trace.addr)
        assert screen.current_view.n_events == len(want.trace)
        assert screen.current_view.kept_with is not None  # its curves and index go to the cache, as a path's do
    cache.wait()
    assert started_on[:2] == ["MainScreen", "MainScreen"] and set(started_on) <= {"MainScreen", "ended"}
    names = os.listdir(cache.folder)
    assert sum(name.endswith(".mtc") for name in names) == 1 and sum(".curves" in name for name in names) == 1


async def test_an_open_finished_before_the_app_started_shows_no_loading_screen(tmp_path, monkeypatch):
    # A warm open is usually done while Textual is imported: the loading screen was made,
    # styled and given a worker only to be replaced at once.
    from memtui.tui.screens import loading

    path = write_tiny_snapshot(tmp_path)
    cache = ModelCache(str(tmp_path / "cache"))
    cache.store(path, open_snapshot(path))
    made: list[object] = []
    real_init = loading.LoadingScreen.__init__

    def counted(self, *args, **kwargs):
        made.append(self)
        real_init(self, *args, **kwargs)
    monkeypatch.setattr(loading.LoadingScreen, "__init__", counted)
    started = EarlyLoad(path, None, cache)
    started._done.wait(30)
    assert started.opened_already()
    app = MemtuiApp(path, cache=cache, started=started)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot, lambda: isinstance(app.screen, MainScreen))
        assert isinstance(app.screen, MainScreen) and not app.loading
        assert len(app.screen_stack) == 2 and made == []
        await pilot.press("q")
    assert app.return_code == 0


async def test_a_file_the_early_open_cannot_read_ends_the_app_with_its_one_line(tmp_path):
    path = tmp_path / "broken.pickle"
    path.write_bytes(b"\x80\x04not a snapshot")
    app = MemtuiApp(path, started=EarlyLoad(path, None, None))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot, lambda: app.load_error is not None)
    assert app.load_error is not None and "\n" not in app.load_error
    assert app.return_code == 2


def test_progress_made_before_the_loading_screen_is_told_then_the_rest(tmp_path, monkeypatch):
    path = write_tiny_snapshot(tmp_path)
    gate, told = threading.Event(), []

    def slow_open(source, device, cache, progress):
        progress("reading", 5, 10)
        progress("reading", 6, 10)
        gate.wait(10)
        progress("indexing", 1, 2)
        return "snapshot", "view"

    monkeypatch.setattr("memtui.tui.early_load.open_first_view", slow_open)
    started = EarlyLoad(path, None, None)
    threading.Timer(0.2, gate.set).start()
    assert started.take(lambda *step: told.append(step), lambda: False) == ("snapshot", "view")
    assert told == [("reading", 6, 10), ("indexing", 1, 2)]


def test_a_loading_screen_that_goes_stops_the_wait_and_the_open(tmp_path, monkeypatch):
    path = write_tiny_snapshot(tmp_path)
    gate, ended = threading.Event(), threading.Event()

    class Gone(Exception):
        pass

    stopped_by: list[type] = []

    def slow_open(source, device, cache, progress):
        gate.wait(10)
        try:
            progress("reading", 1, 2)  # the loading screen's progress raises once it is gone
        except Exception as exc:
            stopped_by.append(type(exc))
            raise
        finally:
            ended.set()

    def gone(*step):
        raise Gone

    monkeypatch.setattr("memtui.tui.early_load.open_first_view", slow_open)
    cache = ModelCache(str(tmp_path / "cache"))
    started = EarlyLoad(path, None, cache)
    assert cache._holds == 1  # nothing it builds is written before the explorer has drawn
    assert started.take(gone, lambda: True) is None
    assert cache._holds == 0
    gate.set()
    assert ended.wait(10)
    assert stopped_by == [Gone]  # the open went no further than its next step


def test_an_open_the_app_never_took_stops_at_its_next_step(tmp_path, monkeypatch):
    path = write_tiny_snapshot(tmp_path)
    gate, ended, went_on = threading.Event(), threading.Event(), []

    def slow_open(source, device, cache, progress):
        gate.wait(10)
        try:
            progress("reading", 1, 2)
            went_on.append(True)
        finally:
            ended.set()

    monkeypatch.setattr("memtui.tui.early_load.open_first_view", slow_open)
    started = EarlyLoad(path, None, None)
    started.abandon()
    gate.set()
    assert ended.wait(10)
    assert went_on == []


def test_the_early_opens_error_is_raised_where_it_is_taken(tmp_path):
    missing = tmp_path / "gone.pickle"
    missing.write_bytes(b"")
    started = EarlyLoad(missing, None, None)
    try:
        started.take(lambda *step: None, lambda: False)
    except SnapshotError as exc:
        assert "\n" not in exc.message
    else:
        raise AssertionError("an empty file was opened")


def test_an_open_that_failed_before_the_app_started_is_its_one_line_and_no_app(tmp_path, monkeypatch, capsys):
    # A refused file, a device the snapshot lacks: the open fails in milliseconds, while
    # Textual is imported. Said before the app starts, stderr holds the line alone, with no
    # terminal codes around it (they went to a file where stderr was one).
    import memtui.tui.app as app_module
    import memtui.tui.early_load as early_load
    from memtui.cli import main

    class Settled(EarlyLoad):  # the open ended before Textual was imported, as it does
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._done.wait(10)

    def no_app(*args, **kwargs):
        raise AssertionError("the app started for an open that had failed")

    monkeypatch.setattr(early_load, "EarlyLoad", Settled)
    monkeypatch.setattr(app_module, "run_app", no_app)
    broken = tmp_path / "broken.pickle"
    broken.write_bytes(b"\x80\x04not a snapshot")
    good = write_tiny_snapshot(tmp_path)
    cache = str(tmp_path / "cache")
    for argv, says in (([str(broken)], "broken.pickle: "), ([str(good), "--device", "7"], "no device 7")):
        capsys.readouterr()
        assert main(["--cache-dir", cache, *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("memtui: ") and says in err and err.count("\n") == 1 and "\x1b" not in err, err
