"""The segment map served to a browser: holes, shades and the legend reach the page.

xterm.js draws block glyphs edge to edge, so a map of full blocks (`█`) became one solid
shape there. The map now draws full cells seven eighths high with two shades alternating
per block; this test serves the fragmented fixture, jumps to its OOM, checks that the
part-free glyphs and the legend arrive, and leaves a screenshot in tests/artifacts/ for
people to look at.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from memtui.tui.views.segment_rows import FULL_CHAR, LEVEL_CHARS
from tests.fixtures.fragmented import write_fragmented_snapshot
from tests.system.web.test_serve_browser import (
    ANSI,
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_FLAGS,
    TerminalText,
    start_serve,
)


@pytest.fixture
def fragmented_server():
    served = start_serve(write_fragmented_snapshot(Path(tempfile.mkdtemp(prefix="memtui-serve-"))))
    try:
        yield served
    finally:
        served.stop()


def test_browser_map_shows_holes_shades_and_legend(fragmented_server):
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    terminal = TerminalText()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("websocket", lambda ws: ws.on("framereceived", terminal.on_frame))
            # The URL the default start prints for the far end of `ssh -L` (localhost, with the token).
            page.goto(fragmented_server.url("localhost"), wait_until="domcontentloaded")
            terminal.wait_for(page, r"free_completed")  # event rows are drawn
            page.locator("#terminal").click()
            mark = len(terminal.raw)
            deadline = time.monotonic() + 30
            pressed = 0.0
            # The screen is sent as changes: the legend may have been drawn before the jump, so
            # it is looked for in all the text, and what the OOM brings (the inspector's
            # "largest free", the map's shades) in what came after the key.
            while time.monotonic() < deadline and "largest free" not in _text(terminal, mark):
                if time.monotonic() - pressed > 5:  # a key sent before the session listens is lost: send again
                    page.keyboard.press("o")
                    pressed = time.monotonic()
                page.wait_for_timeout(200)
            after = _text(terminal, mark)
            assert "largest free" in after and "part free" in _text(terminal, 0), after[-2000:]
            assert FULL_CHAR in after and any(ch in after for ch in LEVEL_CHARS[1:-1])
            page.wait_for_timeout(500)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "serve_segment_map.png"))
        finally:
            browser.close()


def _text(terminal: TerminalText, start: int) -> str:
    return ANSI.sub(b"", bytes(terminal.raw[start:])).decode("utf-8", "replace")
