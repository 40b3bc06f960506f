"""``memtui serve --watch``: the live view of a running job in a browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.live.replay_source import serve_replay
from tests.conftest import SAMPLES
from tests.system.web.test_serve_browser import CHROMIUM, CHROMIUM_FLAGS, TerminalText, start_serve


def test_each_session_runs_memtui_watch_and_writes_only_where_allowed():
    pytest.importorskip("textual_serve")
    from memtui.web.server import ServeOptions, app_command

    base = dict(host="127.0.0.1", port=8000, token="t", max_sessions=1)
    assert app_command(ServeOptions(snapshot_path="", export_dir=None, watch=True, **base)).endswith(
        "-m memtui watch --no-save")
    assert app_command(ServeOptions(snapshot_path="1234:1", export_dir="/srv/x", watch=True, **base)).endswith(
        "-m memtui watch 1234:1 --out /srv/x")


def test_without_a_live_job_it_says_so_in_one_line(live_dir, capsys):
    pytest.importorskip("textual_serve")
    from memtui.cli import main

    assert main(["serve", "--watch", "--port", "1"]) == 2  # refused before it listens
    err = capsys.readouterr().err
    assert err.startswith("memtui: no live job is running") and err.count("\n") == 1


# About 30 s (Chromium and a served session of its own).
@pytest.mark.slow
def test_the_browser_shows_the_live_view(live_dir):
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    job = serve_replay(str(SAMPLES / "oom_training.pickle.xz"), rate=2000)
    served = start_serve(Path("--watch"))
    try:
        assert "the live view of oom_training.pickle.xz" in served.banner[0]
        url = served.banner[0].split(" at ", 1)[1].split()[0]
        terminal = TerminalText()
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                page.on("websocket", lambda ws: ws.on("framereceived", terminal.on_frame))
                page.goto(url)
                terminal.wait_for(page, r"LIVE")
                terminal.wait_for(page, r"Top call sites now")
            finally:
                browser.close()
    finally:
        served.stop()
        job.stop()
