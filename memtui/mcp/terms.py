"""The tools' words for what the analyses say in the command line's.

The analyses and reports are shared with the command line, so their hints name commands
and flags (``memtui oom SNAPSHOT --device-memory SIZE``, ``--at oom``). An agent calls
tools with parameters; every string of an answer or an error goes through
:func:`in_tool_terms`, which says ``explain_oom`` and ``device_memory`` instead. The
words come from the spec table, so a new option is translated without a line here.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from memtui.services.catalog import SPECS

_COMMAND = re.compile(r"\bmemtui ([a-z]+)(?: (?:SNAPSHOT|SNAP|FILE|A B))?(?=( --)?)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)(?: ([A-Z]+|[\w.:]+(?=[:;,)]|$)))?")
# Command-line-only phrases, and what an agent does instead.
_PHRASES = {
    "--json lists all": "max_chars lists more",
    "--json has all": "max_chars shows more",
    "--tui browses them": "a larger limit lists more",
    "--json": "the JSON answer",
}


@cache
def _words() -> tuple[dict[str, str], dict[str, tuple[str, bool]]]:
    tools = {spec.name: spec.tool_name for spec in SPECS}
    flags: dict[str, tuple[str, bool]] = {}  # flag -> (parameter, whether it is a switch)
    for spec in SPECS:
        for opt in spec.option_list():
            if not opt.positional:
                flags.setdefault(opt.cli_flag, (opt.name, opt.kind == "bool"))
    return tools, flags


def _parameter(match: re.Match, flags: dict[str, tuple[str, bool]]) -> str:
    found = flags.get(match.group(1))
    if found is None:
        return match.group(0)
    name, switch = found
    if switch:
        return f"{name}=true" + (f" {match.group(2)}" if match.group(2) else "")
    return f"{name}={match.group(2)}" if match.group(2) else name


def in_tool_terms(text: str) -> str:
    """``text`` with memtui commands named as tools and flags as parameters."""
    if "--" not in text and "memtui " not in text:
        return text
    tools, flags = _words()
    for phrase, instead in _PHRASES.items():
        text = text.replace(phrase, instead)
    text = _COMMAND.sub(lambda m: tools.get(m.group(1), m.group(0)) + (" with" if m.group(2) else "")
                        if m.group(1) in tools else m.group(0), text)
    return _FLAG.sub(lambda m: _parameter(m, flags), text)


def translated(value: Any) -> Any:
    """Every string in ``value`` (dicts and lists walked) in the tools' terms."""
    if isinstance(value, str):
        return in_tool_terms(value)
    if isinstance(value, dict):
        return {k: translated(v) for k, v in value.items()}
    if isinstance(value, list):
        return [translated(v) for v in value]
    return value
