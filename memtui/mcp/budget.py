"""Every answer within a budget of characters, and saying so when it was cut.

An agent pays for every character it reads, and a snapshot of ten million events can make
any list long. So each answer is serialised once, compactly, and while it is over
``max_chars`` the list that costs the most is shortened (the rows kept are the first ones,
which every answer orders most important first), long strings are clipped, and what was
left out is counted under ``"omitted"``. ``"truncated"`` says whether anything was, and
``"more"`` how to get the rest in the tool's own terms.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_CHARS = 8000
MAX_MAX_CHARS = 1_000_000  # asked for explicitly; past this, page
MAX_STRING = 400  # a string longer than this in an answer is clipped in the middle when the answer is over budget
_ROUNDS = 200


def dumps(data: Any) -> str:
    """The one serialisation of an answer: compact, UTF-8 text kept as is."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)


def fit(data: dict, max_chars: int, more: str) -> str:
    """``data`` as JSON text of at most ``max_chars`` characters (``data`` is changed in place).

    ``more`` says how to get what a cut leaves out; it is added with ``"omitted"`` when a
    cut was needed. An answer already marked truncated keeps its own ``"more"``.
    """
    omitted: dict[str, int] = dict(data.get("omitted") or {})
    data.setdefault("truncated", False)
    text = dumps(data)
    if len(text) <= max_chars:
        return text
    data["truncated"] = True
    data["more"] = _joined(data.get("more"), more)
    data["omitted"] = omitted
    clipped = _clip_strings(data)
    if clipped:
        omitted["clipped_strings"] = omitted.get("clipped_strings", 0) + clipped
    for _ in range(_ROUNDS):
        text = dumps(data)
        excess = len(text) - max_chars
        if excess <= 0:
            return text
        found = _costliest_list(data)
        if found is None:
            break
        path, items, cost = found
        # Keep the share of the list that fits, at most half of it per round so the cut
        # converges on the lists that matter rather than emptying the first one found.
        keep = min(len(items) // 2, max(0, int(len(items) * (1 - excess / max(cost, 1)))))
        if keep == len(items):
            keep = len(items) - 1
        omitted[path] = omitted.get(path, 0) + len(items) - keep
        del items[keep:]
    # Nothing left to shorten and still over: the summary and the way on are what is left.
    kept = {k: data[k] for k in ("summary", "truncated", "omitted", "more") if k in data}
    kept["omitted"] = {**omitted, "everything_else": 1}
    return dumps(kept)[:max_chars]


def pre_cut(value: Any, max_chars: int, omitted: dict[str, int], path: str = "") -> Any:
    """``value`` with each list cut to about the rows that might fit in ``max_chars`` (a copy:
    the lists may belong to a remembered result), so a million rows are not compacted and
    measured to keep a few dozen; :func:`fit` then cuts exactly."""
    if isinstance(value, dict):
        return {k: pre_cut(v, max_chars, omitted, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        # Rows are kept that might fit once compacted: compaction shrinks a row to no less
        # than a quarter (frames become lines); the smallest of the first rows stands for all.
        smallest = min((len(dumps(v)) for v in value[:5]), default=2)
        most = max(1, max_chars // max(2, smallest // 4))
        if len(value) > most:
            omitted[path] = omitted.get(path, 0) + len(value) - most
            value = value[:most]
        return [pre_cut(v, max_chars, omitted, f"{path}[]") for v in value]
    return value


def _joined(first: Any, second: str) -> str:
    return f"{first}; {second}" if isinstance(first, str) and first and first != second else second


def _costliest_list(data: Any) -> tuple[str, list, int] | None:
    """The non-empty list (not the summary) whose serialisation is the longest, its path and length."""
    best: tuple[str, list, int] | None = None
    for path, items in _lists(data, ""):
        if not items or path == "summary":
            continue
        cost = len(dumps(items))
        if best is None or cost > best[2]:
            best = (path, items, cost)
    return best


def _lists(value: Any, path: str):
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("omitted", "more"):
                continue
            yield from _lists(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        yield path, value
        for item in value:
            if isinstance(item, (dict, list)):
                yield from _lists(item, f"{path}[]")


def _clip_strings(value: Any) -> int:
    """Clip every string longer than MAX_STRING in place, keeping both ends; how many were."""
    count = 0
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and len(item) > MAX_STRING and key != "more":
                value[key] = clip(item)
                count += 1
            else:
                count += _clip_strings(item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str) and len(item) > MAX_STRING:
                value[i] = clip(item)
                count += 1
            else:
                count += _clip_strings(item)
    return count


def clip(text: str, limit: int = MAX_STRING) -> str:
    """``text`` cut in the middle to ``limit`` characters, saying how many went."""
    if len(text) <= limit:
        return text
    gone = len(text) - limit
    marker = f"…[{gone:,} characters]…"
    half = max(0, (limit - len(marker)) // 2)
    return text[:half] + marker + text[len(text) - half:]
