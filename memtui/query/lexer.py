"""Splitting filter text into tokens.

A word runs to the next space or parenthesis; double quotes inside a word protect
spaces and parentheses (``frame:"step (fused)"``) and ``\\"`` escapes a quote. A ``-``
at the start of a word negates the term. ``or``/``and``/``not`` are keywords only when
unquoted, so ``"or"`` searches for the text ``or``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.query.nodes import FilterError

KEYWORDS = ("or", "and", "not")


@dataclass(frozen=True)
class Token:
    kind: str  # 'word', 'lparen', 'rparen', 'minus', 'or', 'and', 'not', 'end'
    text: str  # the word with quotes removed
    position: int
    literal: bool = False  # opened with a quote: plain text, not a keyword or field
    quoted_from: int | None = None  # index in ``text`` where the first quoted part starts


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch.isspace():
            i += 1
        elif ch == "(":
            tokens.append(Token("lparen", ch, i))
            i += 1
        elif ch == ")":
            tokens.append(Token("rparen", ch, i))
            i += 1
        elif ch == "-":
            tokens.append(Token("minus", ch, i))
            i += 1
        else:
            token, i = _word(source, i)
            tokens.append(token)
    tokens.append(Token("end", "", n))
    return tokens


def _word(source: str, start: int) -> tuple[Token, int]:
    out: list[str] = []
    # A word that opens with a quote is literal text: never a keyword, never field:value.
    literal = source[start] == '"'
    quoted_from = None
    i, n = start, len(source)
    while i < n:
        ch = source[i]
        if ch.isspace() or ch in "()":
            break
        if ch == '"':
            if quoted_from is None:
                quoted_from = len(out)
            i += 1
            while True:
                if i >= n:
                    raise FilterError("unterminated quoted text", start, expected='a closing "')
                ch = source[i]
                if ch == "\\" and i + 1 < n:
                    out.append(source[i + 1])
                    i += 2
                    continue
                if ch == '"':
                    i += 1
                    break
                out.append(ch)
                i += 1
            continue
        out.append(ch)
        i += 1
    text = "".join(out)
    kind = text.lower() if not literal and text.lower() in KEYWORDS else "word"
    return Token(kind, text, start, literal, quoted_from), i
