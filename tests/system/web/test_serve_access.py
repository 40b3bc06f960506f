"""Who may drive a served explorer, tried in a real headless Chromium.

One server started the default way (a generated token) serves every case:

- the URL the banner prints for the far end of ``ssh -L`` (``localhost``) opens a session
  that draws the event log, and so does the ``127.0.0.1`` one;
- a page on another origin (another port of the same host, so the browser sends it the
  token cookie) cannot open the websocket;
- a page reached by a name that is not this machine's (DNS rebinding, simulated with
  Chromium's host resolver rules) gets only the refusal;
- a wrong token gets a one-line refusal page and no session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.server
import re
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.system.web.test_serve_browser import CHROMIUM, CHROMIUM_FLAGS, TerminalText, oom_snapshot, start_serve

REBOUND_NAME = "rebound.example"  # an attacker's name, resolved by Chromium to 127.0.0.1 below


@pytest.fixture(scope="module")
def served():
    served = start_serve(oom_snapshot())
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=[*CHROMIUM_FLAGS, f"--host-resolver-rules=MAP {REBOUND_NAME} 127.0.0.1"])
        try:
            yield browser
        finally:
            browser.close()


def open_session(browser, url: str, text: str = r"segment_alloc") -> None:
    """Open ``url`` in a fresh context and wait until the explorer's event rows are drawn."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    try:
        page = context.new_page()
        external: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(url.split("?")[0]) else external.append(r.url))
        terminal = TerminalText()
        page.on("websocket", lambda ws: ws.on("framereceived", terminal.on_frame))
        response = page.goto(url, wait_until="domcontentloaded")
        assert response.status == 200
        terminal.wait_for(page, text)
        assert external == []  # fonts and scripts come from the server itself
    finally:
        context.close()


def test_tunnel_url_and_loopback_url_both_open_a_session(served, browser):
    assert "?token=" in served.url("localhost") and "ssh -L" in served.banner[1]
    open_session(browser, served.url("localhost"))
    open_session(browser, served.url("127.0.0.1"))


@pytest.fixture
def other_site():
    """Another web server on this machine, serving one empty page."""

    class EmptyPage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!DOCTYPE html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_page_on_another_origin_cannot_open_the_websocket(served, browser, other_site):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(served.url("127.0.0.1"), wait_until="domcontentloaded")  # the token cookie is set
        # A real server on another port: a page the test made up inside the browser would not
        # count as local, and Chromium's own local-network checks would refuse it first.
        evil_origin = f"http://127.0.0.1:{other_site.server_port}"
        page.goto(f"{evil_origin}/", wait_until="domcontentloaded")
        outcome = page.evaluate("""url => new Promise(resolve => {
            const ws = new WebSocket(url);
            ws.onopen = () => resolve("open");
            ws.onerror = () => resolve("error");
            setTimeout(() => resolve("timeout"), 10000);
        })""", f"ws://127.0.0.1:{served.port}/ws?width=80&height=24")
        assert outcome == "error"
        # The cookie went with it: the origin check, not a missing token, refused it.
        assert f"refused a websocket from the page at '{evil_origin}'" in served.wait_for_output(evil_origin)
    finally:
        context.close()


def test_name_that_could_be_rebound_is_refused(served, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        url = served.url("127.0.0.1").replace("127.0.0.1", REBOUND_NAME)
        response = page.goto(url, wait_until="domcontentloaded")
        assert response.status == 403
        assert "does not answer to the name" in page.inner_text("body")
        assert not page.query_selector("#terminal")
    finally:
        context.close()


def test_wrong_token_gets_one_line_and_no_session(served, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        sockets: list[object] = []
        page.on("websocket", lambda ws: sockets.append(ws))
        response = page.goto(f"http://localhost:{served.port}/?token=wrong", wait_until="domcontentloaded")
        assert response.status == 403
        assert page.inner_text("body").strip() == ("memtui: wrong or missing token: open the URL memtui serve "
                                                   "printed (it ends in /?token=...)")
        for path in ("static/", "static/js/textual.js"):  # nothing is listed or served without the token
            response = page.goto(f"http://localhost:{served.port}/{path}")
            assert response.status == 403
        page.wait_for_timeout(300)
        assert sockets == []
    finally:
        context.close()


def test_sessions_beyond_the_limit_are_refused_with_a_reason():
    served = start_serve(oom_snapshot(), "--max-sessions", "2")
    try:
        sessions_beyond_the_limit_are_refused(served)
    finally:
        served.stop()


def sessions_beyond_the_limit_are_refused(served):
    aiohttp = pytest.importorskip("aiohttp")

    async def crowd() -> tuple[int, str]:
        token = re.search(r"token=([^ ]+)", served.url()).group(1)
        origin = f"http://127.0.0.1:{served.port}"
        async with aiohttp.ClientSession(cookies={f"memtui_token_{served.port}": token}) as session:
            sockets = [await session.ws_connect(f"ws://127.0.0.1:{served.port}/ws", origin=origin)
                       for _ in range(2)]
            try:
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await session.ws_connect(f"ws://127.0.0.1:{served.port}/ws", origin=origin)
                async with session.get(served.url()) as page:  # the page says why, in one line
                    return refused.value.status, page.status, await page.text()
            finally:
                for ws in sockets:
                    await ws.close()

    # In a thread of its own: Playwright's synchronous API holds this thread's event loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        socket_status, page_status, page = pool.submit(asyncio.run, crowd()).result(timeout=60)
    assert (socket_status, page_status) == (503, 503)
    assert "2 sessions already open, the most this server runs at once (--max-sessions)" in page
    assert "refused a new session: 2 already open (--max-sessions)" in served.wait_for_output("--max-sessions")
    deadline = time.monotonic() + 20  # the closed sessions' processes end, and the page is served again
    while True:
        try:
            assert "<title>memtui:" in urllib.request.urlopen(served.url(), timeout=10).read().decode()
            break
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
