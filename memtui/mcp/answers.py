"""What every MCP answer shares: the :class:`Answer`, its budget, and the paging options.

An answer is a few lines for a reader and the JSON of the matching ``--json`` command,
with long lists cut to the caller's ``limit`` (``"truncated": true``, what was left out
under ``"omitted"``, how to see more under ``"more"``). The paging options are the MCP
server's own, beside the analysis's options (memtui.services): a command prints every
row, a tool answers a page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memtui.services.common import MAX_ROWS
from memtui.services.options import Option

MAX_LIMIT = MAX_ROWS  # the most rows any one answer holds; page for more
Progress = Callable[[str, int, int], None] | None


@dataclass
class Answer:
    summary: str  # a few lines for a reader
    data: dict  # the --json structure, bounded


def limit_option(default: int, help: str = "the most rows to return") -> Option:
    return Option(help, low=1, high=MAX_LIMIT, name="limit", default=default)


OFFSET = Option("rows to skip, for the next page (the answer's next_offset)", low=0, name="offset", default=0)

# Each tool's paging options, by analysis.
PAGING: dict[str, tuple[Option, ...]] = {
    "top": (limit_option(20), OFFSET),
    "events": (limit_option(50),),
    "stack": (limit_option(50), OFFSET),
    "oom": (limit_option(5, "the most OOMs to explain"),),
    "cycles": (limit_option(20, "the most call sites and bursts to list"),),
    "ranks": (limit_option(64, "the most ranks, sites and groups listed"),),
}


def bounded(lines: list[str], data: dict, omitted: dict, more: str) -> Answer:
    data["truncated"] = bool(omitted)
    if omitted:
        data["omitted"] = omitted
        data["more"] = more
        lines.append(f"truncated ({', '.join(f'{n:,} {k}' for k, n in omitted.items())} left out): {more}")
    return Answer("\n".join(lines), data)


def cut(data: dict, key: str, limit: int, omitted: dict, name: str | None = None) -> None:
    items = data.get(key)
    if isinstance(items, list) and len(items) > limit:
        omitted[name or key] = len(items) - limit
        data[key] = items[:limit]
