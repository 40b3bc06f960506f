"""The filter language's syntax tree and its error type.

Nodes are plain frozen dataclasses; ``str(node)`` gives back a canonical filter text
(fully parenthesised where precedence would otherwise matter), which is what tests and
error reports print.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.errors import UsageError


class FilterError(UsageError):
    """A filter that cannot be parsed or evaluated: says where, and what was expected."""

    def __init__(self, message: str, position: int | None = None, expected: str | None = None) -> None:
        where = f" at column {position + 1}" if position is not None else ""
        super().__init__(f"invalid filter{where}: {message}")
        self.position = position
        self.expected = expected
        self.reason = message


@dataclass(frozen=True)
class Node:
    position: int


@dataclass(frozen=True)
class MatchAll(Node):
    """The empty filter."""

    def __str__(self) -> str:
        return ""


@dataclass(frozen=True)
class And(Node):
    children: tuple[Node, ...]

    def __str__(self) -> str:
        return " ".join(_wrap(c, Or) for c in self.children)


@dataclass(frozen=True)
class Or(Node):
    children: tuple[Node, ...]

    def __str__(self) -> str:
        return " or ".join(str(c) for c in self.children)


@dataclass(frozen=True)
class Not(Node):
    child: Node

    def __str__(self) -> str:
        return "-" + _wrap(self.child, (And, Or))


@dataclass(frozen=True)
class Flag(Node):
    """A bare keyword with no value: ``live``, ``leaked``, ``freed``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Term(Node):
    """``field op value``; ``value`` is already parsed into what the evaluator needs."""

    field: str
    op: str  # ':' '=' '<' '<=' '>' '>='
    text: str  # the value as typed, for printing
    value: object

    def __str__(self) -> str:
        text = self.text
        # Quote what would otherwise read differently: spaces, parentheses, quotes, and a
        # leading ':' ('frame::x' is C++ text, not the field frame).
        if not text or text.startswith(":") or any(ch.isspace() or ch in '()"' for ch in text):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return f"{self.field}{self.op}{text}"


def _wrap(node: Node, kinds: type[Node] | tuple[type[Node], ...]) -> str:
    text = str(node)
    return f"({text})" if isinstance(node, kinds) else text
