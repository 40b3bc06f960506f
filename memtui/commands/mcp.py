"""memtui mcp: the analyses as tools for coding agents, over the Model Context Protocol (stdio).

The server itself is :mod:`memtui.mcp.server`; it needs the ``mcp`` extra, imported only
here, when the command runs. See docs/mcp.md for registering it with a client.
"""

from __future__ import annotations

import os

from memtui.errors import MissingDependencyError, UsageError

NAME = "mcp"
HELP = ("Serve the snapshot analyses (info, top, events, stack, oom, leaks, cycles, diff, ranks) to an MCP client "
        "over stdio; read-only, only files under --root.")


def add_arguments(parser) -> None:
    parser.add_argument("--root", action="append", default=None, metavar="DIR",
                        help="a folder whose snapshots the tools may open (repeatable; default: the current "
                             "directory). Paths are resolved, symlinks included, before the check")


def run(args) -> int:
    roots = args.root or [os.curdir]
    for root in roots:
        if not os.path.isdir(root):
            raise UsageError(f"--root {root}: not a directory")
    try:
        from memtui.mcp.server import serve
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] == "memtui":
            raise  # a bug in memtui, not a missing package
        missing = "" if exc.name.split(".")[0] == "mcp" else f" ({exc.name} is missing)"
        raise MissingDependencyError(f"memtui mcp needs the MCP SDK{missing}: pip install 'memtui[mcp]'") from None
    serve(roots, args.model_cache)
    return 0
