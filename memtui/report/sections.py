"""The vocabulary of a report: a title and sections of lines, typed tables, notes and evidence.

A table's cells keep their values (bytes as integers, a call site as a :class:`Place` with
its frames), each column saying what kind of value it holds, so a front end formats them
its own way. What a table looks like in the command's text (a heading, a line template,
how many rows, the line that says how many more) travels with it, for
:func:`memtui.report.text.text_lines`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# bytes: a size; delta: a signed size; count: a number of things; event: an event index;
# seconds: time into the trace; location: a Place; text: anything else, as it is.
Kind = Literal["bytes", "delta", "count", "event", "seconds", "location", "text"]


@dataclass(frozen=True)
class Place:
    """A location cell: a call site's label (or a file) and, when known, its frames."""

    label: str
    frames: list[dict[str, Any]] | None = None

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Column:
    """A table's column: the key of its cells in each row and the kind of value they hold."""

    key: str
    kind: Kind = "text"
    name: str = ""  # the heading a table widget shows; the key when empty
    unit: str = ""  # a count column's noun: its text line says "3 allocations" (a table widget: 3)

    @property
    def title(self) -> str:
        return self.name or self.key


@dataclass
class Section:
    """What every part of a report has: its key and how its text is laid out."""

    key: str = ""  # names the section, so a front end can pick it out or leave it out
    space: bool = False  # a blank line before it in text, unless it comes first
    indent: str = ""  # before each of its text lines


@dataclass
class Lines(Section):
    """Lines of the report as they are: a headline, figures, a list."""

    lines: list[str] = field(default_factory=list)


@dataclass
class Notes(Section):
    """What to do about it, and how a figure was made."""

    lines: list[str] = field(default_factory=list)


@dataclass
class Evidence(Section):
    """Why the verdict: the evidence behind it, and the other verdicts weighed and why not."""

    because: list[str] = field(default_factory=list)
    alternatives: list[tuple[str, str]] = field(default_factory=list)  # (verdict, why not)
    always: bool = False  # the "because:" line even with no evidence


@dataclass
class Table(Section):
    """Rows of typed cells, one per column; ``line`` lays a row out as text."""

    columns: tuple[Column, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    title: str = ""  # text: a line before the table
    heading: str = ""  # text: the column headings, laid out as ``line`` lays out rows
    line: str = ""  # text: ``str.format`` over the column keys (see memtui.report.text)
    limit: int | None = None  # text: at most this many rows, ...
    tail: int = 0  # ... the last ``tail`` of them from the end
    more: str = ""  # text: said where rows are left out; ``{n}``: how many
    left_out: int = 0  # rows left out before the table was made (said by ``more`` too)
    when_empty: list[str] | None = None  # text with no rows (None: the table says nothing)

    def index(self, key: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.key == key)

    def column(self, key: str) -> Column:
        return self.columns[self.index(key)]

    def values(self, key: str) -> list[Any]:
        k = self.index(key)
        return [row[k] for row in self.rows]

    def records(self) -> list[dict[str, Any]]:
        """The rows as {key: value}."""
        keys = [c.key for c in self.columns]
        return [dict(zip(keys, row)) for row in self.rows]


AnySection = Lines | Notes | Evidence | Table


@dataclass
class Report:
    """A title and the sections under it, as every front end shows a result."""

    title: str
    sections: list[AnySection] = field(default_factory=list)

    def section(self, key: str) -> AnySection | None:
        return next((s for s in self.sections if s.key == key), None)

    def table(self, key: str) -> Table | None:
        found = self.section(key)
        return found if isinstance(found, Table) else None

    def tables(self, key: str) -> list[Table]:
        """Every table named ``key`` (a report of several OOMs has a table of sites for each)."""
        return [s for s in self.sections if isinstance(s, Table) and s.key == key]
