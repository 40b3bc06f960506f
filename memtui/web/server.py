"""A textual-serve server that runs ``memtui SNAP`` once per browser tab.

Each websocket (one per open tab) starts its own app process and ends it when the tab
closes; that is textual-serve's model, kept as it is. memtui adds a page title naming
the snapshot, its own banner, and an optional access token: the token is checked on the
page request and handed to the browser as a cookie so the websocket, which the page
opens to a fixed URL, carries it too.
"""

from __future__ import annotations

import hmac
import html
import logging
import os
import shlex
import sys

from aiohttp import web
from textual_serve.server import Server

TOKEN_COOKIE = "memtui_token"


def app_command(snapshot_path: str) -> str:
    """The shell command textual-serve runs for each browser session."""
    return shlex.join([sys.executable, "-m", "memtui", os.path.abspath(snapshot_path)])


class SnapshotServer(Server):
    """Serves one snapshot; see the module docstring."""

    def __init__(self, snapshot_path: str, host: str, port: int, token: str | None, banner: list[str]) -> None:
        name = os.path.basename(snapshot_path)
        super().__init__(app_command(snapshot_path), host=host, port=port, title=f"memtui: {name}")
        self.token = token
        self.banner = banner

    def initialize_logging(self) -> None:
        # textual-serve logs every request at INFO; one banner line is what users asked for.
        logging.basicConfig(level=logging.WARNING, format="%(message)s")

    async def on_startup(self, app: web.Application) -> None:
        for line in self.banner:
            print(line, flush=True)

    def _authorized(self, request: web.Request) -> bool:
        if not self.token:
            return True
        offered = request.query.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
        return hmac.compare_digest(offered.encode(), self.token.encode())

    async def handle_index(self, request: web.Request):
        if not self._authorized(request):
            raise web.HTTPForbidden(text="memtui: this server needs ?token=... in the URL\n")
        response = await super().handle_index(request)
        title = f"<title>{html.escape(self.title)}</title>"
        response.text = response.text.replace("<head>", "<head>\n    " + title, 1)
        if self.token:
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    async def handle_websocket(self, request: web.Request):
        if not self._authorized(request):
            raise web.HTTPForbidden(text="memtui: missing or wrong token\n")
        return await super().handle_websocket(request)
