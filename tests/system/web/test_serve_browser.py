"""`memtui serve` in a real headless Chromium: the page loads, the event log is drawn,
`o` jumps to the OOM.

The terminal is drawn by xterm.js on a canvas, so its text is not in the DOM. The test
reads what the app sends to the page over the websocket (the same bytes xterm.js
draws) and also saves a screenshot under tests/artifacts/ for people to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, SHARED

ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def oom_snapshot() -> Path:
    for path in [*sorted(SAMPLES.glob("*oom*")), SHARED / "oom_training.pickle"]:
        if path.exists():
            return path
    pytest.skip("no OOM snapshot available")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"memtui serve exited: {proc.stdout.read() if proc.stdout else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("memtui serve did not start listening")


class TerminalText:
    """Plain text of everything the app has sent to the page so far."""

    def __init__(self) -> None:
        self.raw = bytearray()

    def on_frame(self, payload) -> None:
        data = payload if isinstance(payload, bytes) else payload.encode("utf-8", "replace")
        self.raw.extend(data)

    def text(self) -> str:
        return ANSI.sub(b"", bytes(self.raw)).decode("utf-8", "replace")

    def wait_for(self, page, pattern: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()):
                return
            page.wait_for_timeout(200)
        raise AssertionError(f"{pattern!r} never appeared in the browser terminal; last text: {self.text()[-2000:]}")


class Served:
    """A running ``memtui serve``: its banner, and what it has printed since (``output()``)."""

    def __init__(self, proc: subprocess.Popen, port: int, banner: list[str]) -> None:
        self.proc, self.port, self.banner = proc, port, banner
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_output(self, text: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.output()

    def url(self, host: str = "127.0.0.1") -> str:
        """The URL the banner prints for ``host`` (the ssh -L line names localhost)."""
        for line in self.banner:
            for found in re.findall(r"http://[^ ]+", line):
                if found.startswith(f"http://{host}:{self.port}/"):
                    return found
        raise AssertionError(f"no URL for {host} in the banner: {self.banner}")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        return self.output()


def start_serve(snapshot: Path, *options: str) -> Served:
    """``memtui serve SNAPSHOT`` on a free port, once it listens and has printed its banner."""
    pytest.importorskip("textual_serve", reason="textual-serve not installed (pip install 'memtui[web]')")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "memtui", "serve", str(snapshot), "--port", str(port), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    banner: list[str] = []
    try:
        wait_for_port(port, proc)
        while not banner or "export (x)" not in banner[-1]:  # the banner's last line
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"memtui serve ended: {banner}")
            banner.append(line.rstrip("\n"))
    except BaseException:
        proc.kill()
        raise
    return Served(proc, port, banner)


@pytest.fixture
def server():
    served = start_serve(oom_snapshot())
    try:
        yield served
    finally:
        served.stop()


# About 35 s (Chromium and a served session); tests/system/web/test_serve_segment_map.py
# drives the served explorer in Chromium in the default run.
@pytest.mark.slow
def test_browser_shows_event_log_and_jumps_to_oom(server, tmp_path):
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    terminal = TerminalText()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("websocket", lambda ws: ws.on("framereceived", terminal.on_frame))
            page.goto(server.url(), wait_until="domcontentloaded")
            assert "memtui" in page.title() and oom_snapshot().name.split(".")[0] in page.title()
            terminal.wait_for(page, r"segment_alloc")  # event rows are drawn
            page.locator("#terminal").click()
            mark = len(terminal.raw)
            page.keyboard.press("o")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not re.search(r"\boom\b", terminal.text()[mark:]):
                page.wait_for_timeout(200)
            after = ANSI.sub(b"", bytes(terminal.raw[mark:])).decode("utf-8", "replace")
            assert re.search(r"\boom\b", after), after[-2000:]
            page.wait_for_timeout(500)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "serve_oom.png"))
        finally:
            browser.close()


def test_serve_refuses_bad_file_before_listening(tmp_path):
    pytest.importorskip("textual_serve", reason="textual-serve not installed")
    result = subprocess.run([sys.executable, "-m", "memtui", "serve", str(tmp_path / "missing.pickle")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"memtui: {tmp_path / 'missing.pickle'}: no such file"]


def test_serve_without_textual_serve_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['textual_serve'] = None; sys.modules['textual_serve.server'] = None;"
            "from memtui.cli import main; sys.exit(main(['serve', 'x.pickle']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "pip install 'memtui[web]'" in result.stderr


def test_banner_warns_off_loopback_and_without_token():
    from memtui.commands.serve import banner_lines

    local = banner_lines("snap.pickle", "127.0.0.1", 8123, "abc")
    assert "ssh -L 8123:127.0.0.1:8123" in local[1] and "open http://localhost:8123/?token=abc" in local[1]
    assert not any("WARNING" in line for line in local)
    public = banner_lines("snap.pickle", "0.0.0.0", 8123, None)
    assert "anyone who can reach port 8123 can read this snapshot" in public[1]
    assert "no token (--no-token)" in public[2]
    assert "0.0.0.0" not in public[0]  # a wildcard bind prints the machine's name, which a browser can open
    assert "?token=a%2Fb" in banner_lines("snap.pickle", "0.0.0.0", 8123, "a/b")[0]
    assert "export (x) is off" in local[-1]
    assert "only inside /srv/out" in banner_lines("s", "127.0.0.1", 1, "t", "/srv/out")[-1]
