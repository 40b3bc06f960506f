"""memtui mcp: the analyses as tools for coding agents, over the Model Context Protocol (stdio).

The server itself is :mod:`memtui.mcp.server`, a front end the command line hands down
(``args.front_ends``); it needs the ``mcp`` extra, imported only when the command runs.
See docs/mcp.md for registering it with a client.
"""

from __future__ import annotations

import os

from memtui.errors import UsageError

NAME = "mcp"
HELP = ("Serve the snapshot analyses to an MCP client over stdio, as tools (docs/mcp.md lists them, with what each "
        "takes); read-only, only files under --root.")


def add_arguments(parser) -> None:
    parser.add_argument("--root", action="append", default=None, metavar="DIR",
                        help="a folder whose snapshots the tools may open (repeatable; default: the current "
                             "directory). Paths are resolved, symlinks included, before the check")


def run(args) -> int:
    roots = args.root or [os.curdir]
    for root in roots:
        if not os.path.isdir(root):
            raise UsageError(f"--root {root}: not a directory")
    serve = args.front_ends.mcp_server()
    serve(roots, args.model_cache)
    return 0
