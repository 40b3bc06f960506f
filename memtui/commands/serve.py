"""memtui serve: the explorer in a web browser (needs the ``web`` extra)."""

from __future__ import annotations

import getpass
import ipaddress
import secrets
import socket

from memtui.errors import UsageError
from memtui.load import inspect_source

NAME = "serve"
HELP = "Serve the explorer for one snapshot to a web browser (each tab runs its own session)."


def add_arguments(parser) -> None:
    parser.add_argument("snapshot", help="snapshot file to serve")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: only this machine; use ssh -L from a laptop)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--token", nargs="?", const="", default=None,
                        help="require ?token=TOKEN in the URL; without a value one is generated")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def banner_lines(name: str, host: str, port: int, token: str | None) -> list[str]:
    query = f"?token={token}" if token else ""
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/{query}"
    lines = [f"memtui: serving {name} at {url}  (Ctrl+C stops)"]
    if is_loopback(host):
        lines.append(f"memtui: from a laptop: ssh -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}"
                     f"  then open http://localhost:{port}/{query}")
    else:
        lines.append(f"memtui: WARNING: bound to {host}: anyone who can reach port {port} can read this snapshot"
                     + ("" if token else " (add --token to require a secret in the URL)"))
    return lines


def run(args) -> int:
    server_class = args.front_ends.snapshot_server()  # a missing textual-serve is said first
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    info = inspect_source(args.snapshot)  # a bad file fails here, with one line, not in each tab
    token = args.token
    if token == "":
        token = secrets.token_urlsafe(16)
    name = info.path.rsplit("/", 1)[-1]
    server = server_class(info.path, args.host, args.port, token, banner_lines(name, args.host, args.port, token))
    try:
        server.serve()
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
    return 0
