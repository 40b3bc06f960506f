"""A report as the commands print it: sections one after another, tables laid out by
their own heading and line template."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from memtui.report.format import template_value
from memtui.report.sections import AnySection, Evidence, Lines, Notes, Report, Table


def text_lines(report: Report, skip: Collection[str] = ()) -> list[str]:
    """Every section's lines but those whose key is in ``skip``; a section that says
    nothing takes no blank line either."""
    out: list[str] = []
    for section in report.sections:
        if section.key in skip:
            continue
        lines = section_lines(section)
        if not lines:
            continue
        if section.space and out:
            out.append("")
        out += [section.indent + line for line in lines]
    return out


def section_lines(section: AnySection) -> list[str]:
    if isinstance(section, (Lines, Notes)):
        return list(section.lines)
    if isinstance(section, Evidence):
        return evidence_lines(section)
    if isinstance(section, Table):
        return table_lines(section)
    raise TypeError(f"not a report section: {section!r}")


def evidence_lines(section: Evidence) -> list[str]:
    out = ["because:"] + [f"  - {text}" for text in section.because] if section.because or section.always else []
    if section.alternatives:
        out.append("also considered:")
        out += [f"  - {verdict}: {why}" for verdict, why in section.alternatives]
    return out


def table_lines(table: Table) -> list[str]:
    if not table.rows:
        return list(table.when_empty or [])
    out = [table.title] if table.title else []
    if table.heading:
        out.append(table.heading)
    rows = table.rows
    head, tail = rows, []
    if table.limit is not None and len(rows) > table.limit:
        head, tail = rows[:table.limit - table.tail], rows[len(rows) - table.tail:] if table.tail else []
    out += [row_line(table, row) for row in head]
    left_out = len(rows) - len(head) - len(tail) + table.left_out
    if left_out and table.more:
        out.append(table.more.format(n=left_out))
    out += [row_line(table, row) for row in tail]
    return out


def row_line(table: Table, row: tuple[Any, ...]) -> str:
    return table.line.format(**{c.key: template_value(c, v) for c, v in zip(table.columns, row)})
