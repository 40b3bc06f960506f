"""A textual-serve server that runs ``memtui SNAP`` once per browser tab.

Each websocket (one per open tab) starts its own app process and ends it when the tab
closes; that is textual-serve's model, kept, with a limit on how many run at once. What
memtui adds is who may connect (the rules are in :mod:`memtui.web.access`):

- every request needs the token (unless the server was started without one) and names a
  ``Host`` that DNS rebinding cannot forge; the websocket must also come from the page's
  own origin;
- the page (``index.html``) loads nothing from elsewhere and opens its websocket on the
  address it was opened at, so ``http://localhost:PORT`` through ``ssh -L`` works as well
  as ``127.0.0.1``;
- each session's app gets ``--export-dir DIR`` or ``--no-export``, so whoever holds the
  page writes files only where the server said.
"""

from __future__ import annotations

import html
import logging
import os
import secrets
import shlex
import sys
from dataclasses import dataclass, field
from importlib import resources
from string import Template

from aiohttp import web
from textual_serve.server import Server, to_int

from memtui.web.access import host_allowed, machine_names, same_origin, token_matches

PAGE = Template(resources.files("memtui.web").joinpath("index.html").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ServeOptions:
    """What ``memtui serve`` decided: ``token`` None means none is asked for; ``export_dir``
    None means exports are off in served sessions."""

    snapshot_path: str
    host: str
    port: int
    token: str | None
    max_sessions: int
    export_dir: str | None
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    watch: bool = False  # serve `memtui watch` (snapshot_path is then its target, or "")


def app_command(options: ServeOptions) -> str:
    """The shell command textual-serve runs for each browser session."""
    if options.watch:
        # The live view: frozen and saved snapshots are written only where --export-dir says.
        saves = ["--out", options.export_dir] if options.export_dir else ["--no-save"]
        target = [options.snapshot_path] if options.snapshot_path else []
        return shlex.join([sys.executable, "-m", "memtui", "watch", *target, *saves])
    exports = ["--export-dir", options.export_dir] if options.export_dir else ["--no-export"]
    return shlex.join([sys.executable, "-m", "memtui", os.path.abspath(options.snapshot_path), *exports])


def refusal(status: int, text: str) -> web.Response:
    """A short page that says, in one line, why the request was refused."""
    body = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>memtui: refused</title></head>"
            f"<body style='font-family:monospace'><p>{html.escape(text)}</p></body></html>\n")
    return web.Response(status=status, text=body, content_type="text/html")


class SnapshotServer(Server):
    """Serves one snapshot; see the module docstring."""

    def __init__(self, *, banner: list[str], **options) -> None:
        options = ServeOptions(**options)
        name = (f"watch {options.snapshot_path}".strip() if options.watch
                else os.path.basename(options.snapshot_path))
        super().__init__(app_command(options), host=options.host, port=options.port, title=f"memtui: {name}")
        self.options = options
        self.banner = banner
        self.cookie_name = f"memtui_token_{options.port}"  # cookies are shared by every port of a host
        self.allowed_hosts = machine_names() | {name.lower() for name in options.allowed_hosts}
        self.sessions = 0

    def initialize_logging(self) -> None:
        # textual-serve logs every request at INFO; the banner and refusals are what users read.
        logging.basicConfig(level=logging.WARNING, format="%(message)s")

    async def on_startup(self, app: web.Application) -> None:
        for line in self.banner:
            print(line, flush=True)

    def say(self, line: str) -> None:
        print(f"memtui: {line}", file=sys.stderr, flush=True)

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """Host and token, before any route (the page, its files, the websocket, downloads)."""
        host = request.headers.get("Host")
        if not host_allowed(host, self.allowed_hosts):
            self.say(f"refused a request for Host {host!r:.80} (not an address or a name of this machine; "
                     "--allow-host NAME accepts one)")
            return refusal(403, f"memtui: refused: this server does not answer to the name {host!r:.80} "
                                "(a guard against DNS rebinding); open it by IP address or localhost, "
                                "or start memtui serve with --allow-host NAME")
        token = self.options.token
        if token is not None:
            offered = request.query.get("token") or request.cookies.get(self.cookie_name)
            if not token_matches(offered, token):
                self.say(f"refused {request.path:.80}: {'wrong' if offered else 'no'} token")
                return refusal(403, "memtui: wrong or missing token: open the URL memtui serve printed "
                                    "(it ends in /?token=...)")
        response = await handler(request)
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response

    async def handle_index(self, request: web.Request) -> web.Response:
        if self.sessions >= self.options.max_sessions:
            return self._full()
        nonce = secrets.token_urlsafe(16)
        page = PAGE.substitute(title=html.escape(self.title), nonce=nonce,
                               font_size=to_int(request.query.get("fontsize", "16"), 16))
        response = web.Response(text=page, content_type="text/html")
        # Nothing but this server: no fonts or scripts from elsewhere, no framing by other pages.
        response.headers["Content-Security-Policy"] = (
            f"default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
            "base-uri 'none'; form-action 'none'")
        response.headers["Cache-Control"] = "no-store"
        if self.options.token is not None and request.query.get("token"):
            response.set_cookie(self.cookie_name, self.options.token, httponly=True, samesite="Strict")
        return response

    def _full(self) -> web.Response:
        limit = self.options.max_sessions
        self.say(f"refused a new session: {limit} already open (--max-sessions)")
        return refusal(503, f"memtui: {limit} session{'s' if limit != 1 else ''} already open, the most this "
                            "server runs at once (--max-sessions): close a tab, then reload")

    async def handle_websocket(self, request: web.Request):
        origin = request.headers.get("Origin")
        if not same_origin(origin, request.headers.get("Host")):
            self.say(f"refused a websocket from the page at {origin!r:.80} (another origin)")
            return refusal(403, "memtui: refused: the websocket must come from this server's own page")
        if self.sessions >= self.options.max_sessions:
            return self._full()
        self.sessions += 1
        try:
            return await super().handle_websocket(request)
        finally:
            self.sessions -= 1
