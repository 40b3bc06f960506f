"""What each ``memtui mcp`` tool answers by default on one snapshot: characters and seconds.

    python benchmarks/mcp_answers.py SNAPSHOT [--other SNAPSHOT] [--rounds 2] [--only TOOL ...]

Starts ``memtui mcp`` as a client would (the SDK's stdio client), calls every tool with
only its required arguments (``allocation_stack`` gets the largest live block's
address_n, ``diff_snapshots`` and ``compare_runs`` the snapshot against ``--other`` or
itself), and prints, per tool, the characters of the whole answer as the client receives
it (every content item and any structured content) and the seconds of the first call and
of a repeated one. The first call on a file also pays its load; the table says which.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def answer_chars(result) -> int:
    text = sum(len(item.text) for item in result.content if getattr(item, "text", None) is not None)
    structured = len(json.dumps(result.structured_content)) if result.structured_content is not None else 0
    return text + structured


async def measure(snapshot: str, other: str, rounds: int, only: list[str]) -> list[tuple[str, int, float, float, bool]]:
    import mcp

    folder = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in (snapshot, other)])
    params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memtui", "mcp", "--root", folder],
                                       cwd=str(ROOT))
    rows = []
    async with mcp.stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        started = time.perf_counter()
        await session.call_tool("snapshot_info", {"path": snapshot})  # the load, timed apart
        load = time.perf_counter() - started
        rows.append(("(load)", 0, load, 0.0, False))
        top = await session.call_tool("top_allocations", {"path": snapshot, "limit": 1})
        address_n = _first_address_n(top)
        for name, tool in sorted(tools.items()):
            if only and name not in only:
                continue
            required = set(tool.input_schema.get("required", []))
            args = {"path": snapshot} if "path" in required else {}
            if name == "allocation_stack":
                args["address_n"] = address_n
            if {"a", "b"} <= required:
                args.update(a=snapshot, b=other)
            if "inputs" in required:
                args["inputs"] = [snapshot, other]
            if "root" in required:
                args["root"] = folder
            times, chars, error = [], 0, False
            for _ in range(rounds):
                started = time.perf_counter()
                result = await session.call_tool(name, args)
                times.append(time.perf_counter() - started)
                chars, error = answer_chars(result), bool(result.is_error)
            rows.append((name, chars, times[0], times[-1], error))
    return rows


def _first_address_n(result) -> str:
    for item in result.content:
        text = getattr(item, "text", "")
        if '"address_n"' in text:
            start = text.index('"address_n"')
            return text[start:].split('"')[3]
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot")
    parser.add_argument("--other", help="the second snapshot for the tools that compare two (default: the same)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="+", default=[], metavar="TOOL", help="measure only these tools")
    args = parser.parse_args()
    rows = asyncio.run(measure(os.path.abspath(args.snapshot), os.path.abspath(args.other or args.snapshot),
                               max(1, args.rounds), args.only))
    print(f"{'tool':24} {'chars':>10} {'first s':>8} {'warm s':>8}")
    for name, chars, first, warm, error in rows:
        print(f"{name:24} {chars:>10,} {first:>8.2f} {warm:>8.2f}" + ("  (error)" if error else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
