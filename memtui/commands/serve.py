"""memtui serve: the explorer in a web browser (needs the ``web`` extra).

Safe by default: a token is generated and printed in the URL (as Jupyter does), the
server binds to 127.0.0.1 and prints the ``ssh -L`` line that reaches it from a laptop,
and browser sessions cannot write files unless ``--export-dir`` names where.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import secrets
import socket
import sys
from urllib.parse import quote

from memtui.commands._argtypes import positive_int
from memtui.errors import UsageError
from memtui.load.source import inspect_source

NAME = "serve"
HELP = ("Serve the explorer for one snapshot to a web browser (each tab runs its own session). "
        "A token is required by default: open the URL it prints.")
MAX_TOKEN_CHARS = 256


def add_arguments(parser) -> None:
    parser.add_argument("snapshot", nargs="?", help="snapshot file to serve (with --watch: which live job, optional)")
    parser.add_argument("--watch", action="store_true",
                        help="serve the live view of a running job (memtui watch) instead of a snapshot file")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: only this machine; use ssh -L from a laptop)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--token", action="store_true",
                        help="require a generated token in the URL (the default; kept for scripts that pass it)")
    tokens.add_argument("--token-file", metavar="FILE",
                        help="require the token written in FILE (its first line) instead of a generated one; "
                             "a file, not the command line, so other users cannot read it with ps")
    tokens.add_argument("--no-token", action="store_true",
                        help="require no token: anyone who can reach the port drives the explorer (warned)")
    parser.add_argument("--max-sessions", type=positive_int, default=4, metavar="N",
                        help="browser sessions running at once, each its own process (default 4)")
    parser.add_argument("--export-dir", metavar="DIR",
                        help="let browser sessions export (x), only inside DIR (default: export is off)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests that name NAME as their host (a proxy's name); "
                             "IP addresses, localhost and this machine's names are always answered")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: str) -> str:
    """The first line of ``path``, stripped; one clear line if it cannot be a token."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline(MAX_TOKEN_CHARS + 2).strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--token-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if not token:
        raise UsageError(f"--token-file {path}: its first line is empty")
    if len(token) > MAX_TOKEN_CHARS or not token.isprintable():
        raise UsageError(f"--token-file {path}: the token must be one printable line of at most "
                         f"{MAX_TOKEN_CHARS} characters")
    return token


def choose_token(args) -> str | None:
    if args.no_token:
        return None
    if args.token_file is not None:
        return read_token_file(args.token_file)
    return secrets.token_urlsafe(24)


def url_host(host: str) -> str:
    """The host to print in the URL: the machine's name for a wildcard bind, brackets for IPv6."""
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def banner_lines(name: str, host: str, port: int, token: str | None, export_dir: str | None = None) -> list[str]:
    query = f"?token={quote(token, safe='')}" if token else ""
    lines = [f"memtui: serving {name} at http://{url_host(host)}:{port}/{query}  (Ctrl+C stops)"]
    if is_loopback(host):
        lines.append(f"memtui: from a laptop: ssh -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}"
                     f"  then open http://localhost:{port}/{query}")
    else:
        lines.append(f"memtui: WARNING: bound to {host}: anyone who can reach port {port} "
                     + ("and has the token can drive the explorer" if token else "can read this snapshot"))
    if token is None:
        lines.append("memtui: WARNING: no token (--no-token): any program or user on a machine that reaches "
                     f"port {port} can drive the explorer")
    lines.append(f"memtui: export (x) writes only inside {export_dir}" if export_dir
                 else "memtui: export (x) is off in browser sessions (--export-dir DIR allows it)")
    return lines


def watched(target: str | None) -> tuple[str, str]:
    """The target of ``--watch`` and how the banner names it; one line if no live job matches now."""
    from memtui.live.runtime import list_jobs, runtime_dir, select_jobs

    jobs = list_jobs(runtime_dir(create=False))
    chosen = select_jobs(jobs, target) if target else jobs
    if not chosen:
        what = f"matches {target!r}" if target else "is running"
        raise UsageError(f"no live job {what}: start one with 'memtui run --live script.py', "
                         "memtui.record.live() or MEMTUI_LIVE=1 ('memtui watch --list' shows them)")
    return target or "", f"the live view of {chosen[-1].name}" if len(chosen) == 1 else "the live view"


def run(args) -> int:
    server_class = args.front_ends.snapshot_server()  # a missing textual-serve is said first
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    export_dir = None
    if args.export_dir is not None:
        if not os.path.isdir(args.export_dir):
            raise UsageError(f"--export-dir {args.export_dir}: not a directory")
        export_dir = os.path.realpath(args.export_dir)
    if args.watch:
        source, name = watched(args.snapshot)
    else:
        if not args.snapshot:
            raise UsageError("memtui serve needs a snapshot file (or --watch for a running job)")
        source = inspect_source(args.snapshot).path  # a bad file fails here, with one line, not in each tab
        name = source.rsplit("/", 1)[-1]
    token = choose_token(args)
    server = server_class(snapshot_path=source, host=args.host, port=args.port, token=token,
                          max_sessions=args.max_sessions, export_dir=export_dir,
                          allowed_hosts=frozenset(args.allow_host), watch=args.watch,
                          banner=banner_lines(name, args.host, args.port, token, export_dir))
    try:
        server.serve()
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
    finally:
        sys.stdout.flush()
    return 0
