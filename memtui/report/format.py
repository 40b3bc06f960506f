"""Small formatters the reports share, and a cell's text by its column's kind."""

from __future__ import annotations

from typing import Any

from memtui.report.sections import Column
from memtui.units import format_bytes, format_seconds, plural

SPARK = " ▁▂▃▄▅▆▇█"


def signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


def sparkline(values: list[int], width: int = 12) -> str:
    """A tiny bar chart of ``values`` (resampled to ``width``)."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[int(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    low, high = min(values), max(values)
    if high == low:
        return "─" * len(values)
    return "".join(SPARK[1 + int((v - low) * (len(SPARK) - 2) / (high - low))] for v in values)


def cell_text(column: Column, value: Any) -> str:
    """A cell as a table widget shows it: sizes as ``1.50 GiB``, counts and events with
    thousands separators; nothing for a missing value."""
    if value is None:
        return ""
    kind = column.kind
    if kind == "bytes":
        return format_bytes(value)
    if kind == "delta":
        return signed_bytes(value)
    if kind in ("count", "event"):
        return f"{value:,}"
    if kind == "seconds":
        return format_seconds(value)
    return str(value)


def template_value(column: Column, value: Any) -> Any:
    """A cell as a text line template takes it: numbers stay numbers, so the template's
    own format spec (``{count:>7,}``) lays them out; sizes and places become text."""
    if value is None:
        return ""
    if column.kind in ("count", "event"):
        return plural(value, column.unit) if column.unit else value
    return cell_text(column, value)
