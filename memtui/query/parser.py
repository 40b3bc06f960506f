"""Filter text → syntax tree.

Grammar (``not`` binds tighter than the implicit AND, which binds tighter than ``or``)::

    filter  := or_expr?
    or_expr := and_expr ("or" and_expr)*
    and_expr:= unary (("and")? unary)*
    unary   := ("not" | "-") unary | "(" or_expr ")" | term
    term    := FIELD OP VALUE | "live" | "leaked" | "freed" | WORD

A bare WORD is an allocation id when it looks like one (``7f064c000000_0``), an address
when it starts with ``0x``, and otherwise a search of the stack's frames (like ``frame:``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from memtui.query import values as v
from memtui.query.lexer import Token, tokenize
from memtui.query.nodes import And, FilterError, Flag, MatchAll, Node, Not, Or, Term

FLAGS = ("live", "leaked", "freed")

# field -> (what a value looks like, for errors; operators it accepts)
FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "action": ("an action name such as alloc, free, oom, segment", (":",)),
    "size": ("a size such as 1MiB", (":",) + v.COMPARISONS),
    "addr": ("an address such as 7f064c000000", (":",)),
    "id": ("an allocation id such as 7f064c000000_0", (":",)),
    "file": ("a file name such as train.py or train.py:42", (":",)),
    "func": ("a function name", (":",)),
    "frame": ("text to find in a stack frame", (":",)),
    "stream": ("a stream number", (":",)),
    "device": ("a device number", (":",)),
    "time": ("a time such as 1.5s, 200ms or 1s..3s", (":",) + v.COMPARISONS),
    "event": ("an event index such as 1000 or 1000..2000", (":",) + v.COMPARISONS),
    "ctx": ("compile-context text", (":",)),
    "meta": ("user-metadata text or key=value", (":",)),
    "pool": ("a memory pool: an id such as 0,1, or default, private, graph, mempool (graph1, mempool2)", (":",)),
    "seg": ("a segment address such as 7f0640000000", (":",)),
}
ALIASES = {"function": "func", "filename": "file", "index": "event", "segment": "seg", "dev": "device"}

# Parentheses and `not`s nested deeper than this are refused: each level costs the parser,
# the evaluator and str() a few Python frames, and no real filter comes near it.
MAX_DEPTH = 100

_FIELD_TERM = re.compile(r"^([A-Za-z_]+)(<=|>=|=|<|>|:)(.*)$", re.DOTALL)


def parse(source: str) -> Node:
    """Parse filter text; raises FilterError with the column and what was expected."""
    parser = _Parser(tokenize(source))
    if parser.peek().kind == "end":
        return MatchAll(0)
    node = parser.or_expr()
    token = parser.peek()
    if token.kind == "rparen":
        raise FilterError("unexpected ')' with no '(' before it", token.position, expected="a term or end of filter")
    if token.kind != "end":  # cannot happen: and_expr consumes every term
        raise FilterError(f"unexpected {token.text!r}", token.position, expected="end of filter")
    return node


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0  # the parentheses and `not`s open around the current position

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def or_expr(self) -> Node:
        first = self.peek()
        children = [self.and_expr()]
        while self.peek().kind == "or":
            self.take()
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else Or(first.position, tuple(children))

    def and_expr(self) -> Node:
        first = self.peek()
        children = [self.unary()]
        while self.peek().kind not in ("or", "rparen", "end"):
            if self.peek().kind == "and":
                self.take()
            children.append(self.unary())
        return children[0] if len(children) == 1 else And(first.position, tuple(children))

    def unary(self) -> Node:
        token = self.take()
        if token.kind in ("not", "minus"):
            if self.peek().kind in ("end", "rparen", "or", "and"):
                self._expected_term(self.peek(), after=token.text)
            with self._nested(token):
                return Not(token.position, self.unary())
        if token.kind == "lparen":
            if self.peek().kind == "rparen":
                self._expected_term(self.peek(), after="(")
            with self._nested(token):
                node = self.or_expr()
            closing = self.take()
            if closing.kind != "rparen":
                raise FilterError(f"expected ')' to close the '(' at column {token.position + 1}",
                                  closing.position, expected="')'")
            return node
        if token.kind == "word":
            return parse_term(token)
        previous = self.tokens[self.pos - 2].text if self.pos >= 2 else None
        self._expected_term(token, after=previous)
        raise AssertionError

    @contextmanager
    def _nested(self, token: Token) -> Iterator[None]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"the filter nests parentheses and 'not' more than {MAX_DEPTH} deep",
                              token.position, expected=f"at most {MAX_DEPTH} levels")
        try:
            yield
        finally:
            self.depth -= 1

    @staticmethod
    def _expected_term(token: Token, after: str | None) -> None:
        got = "end of filter" if token.kind == "end" else repr(token.text)
        where = f" after {after!r}" if after else ""
        raise FilterError(f"expected a term{where}, got {got}", token.position, expected="a term")


def parse_term(token: Token) -> Node:
    text, position = token.text, token.position
    if not token.literal:
        if text.lower() in FLAGS:
            return Flag(position, text.lower())
        m = _FIELD_TERM.match(text)
        if m and not _cpp_scope(m, token):
            name = m.group(1).lower()
            field = ALIASES.get(name, name)
            if field not in FIELDS:
                raise FilterError(f"unknown field {m.group(1)!r}; fields are {', '.join(FIELDS)}", position,
                                  expected="a field name")
            op = m.group(2)
            return field_term(field, op, m.group(3), position, position + len(m.group(1)) + len(op))
        if v.looks_like_address_n(text):
            return field_term("id", ":", text, position, position)
        if v.looks_like_hex_address(text):
            return field_term("addr", ":", text, position, position)
    return Term(position, "frame", ":", text, text.lower())


def _cpp_scope(m: re.Match[str], token: Token) -> bool:
    """``at::native`` is C++ text, not the field ``at``; ``frame:":"`` is the field frame."""
    value_start = m.end(2)
    value_quoted = token.quoted_from is not None and token.quoted_from <= value_start
    return m.group(3).startswith(":") and not value_quoted


def field_term(field: str, op: str, text: str, position: int, value_position: int) -> Term:
    what, ops = FIELDS[field]
    if op not in ops:
        raise FilterError(f"{field} takes ':' (not {op!r})", position + len(field), expected="':'")
    return Term(position, field, op, text, _parse_value(field, op, text, value_position, what))


def _parse_value(field: str, op: str, text: str, position: int, what: str) -> object:
    if field == "size":
        return v.parse_range(text, op, position, v.size_value, what)
    if field == "time":
        return v.parse_range(text, op, position, v.time_value, what)
    if field == "event":
        return v.parse_range(text, op, position, v.index_value, what)
    if field == "action":
        return v.name_list(text, position, what)
    if field == "pool":
        return v.pool_value(text, position, what)
    if field in ("stream", "device"):
        return v.int_list(text, position, what)
    if field in ("addr", "id", "seg"):
        return v.address_value(text, position, what)
    if field == "file":
        return v.file_value(text)
    return text.lower()  # func, frame, ctx, meta: case-insensitive substrings
