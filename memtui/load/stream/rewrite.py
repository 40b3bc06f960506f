"""Rewrite the unframed opcode stream so the unpickler never holds the whole trace.

Three substitutions, each a regular expression with a fixed replacement so the regex
engine does all the work in C:

* a trace list (an EMPTY_LIST followed by an entry dict whose first key is ``action``)
  becomes a GLOBAL naming this load's sink: the unpickler then calls the sink's
  ``extend`` with each batch of entries (APPENDS) instead of growing a list;
* an entry dict's MEMOIZE becomes ``EMPTY_TUPLE MEMOIZE POP``: the memo slot keeps its
  number (later indices stay exact) but holds the shared empty tuple, not the dict, so
  the dict dies with its batch;
* the fresh ``'N/A'`` string torch writes as each entry's compile_context gets the same
  treatment.

A replaced slot is never referred to by a file torch writes. If some other file does, the
reference yields the empty tuple, which the sink and the final structure check reject,
and the load falls back to the plain path. The patterns carry enough context (the key
references learnt from the first entry) that they cannot match inside an argument of a
well-formed file; a miss only costs memory, never correctness.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from memtui.load.stream.header import FirstEntry

CHUNK = 8 << 20
_DROPPED_MEMO = b")\x940"  # EMPTY_TUPLE, MEMOIZE, POP


class Rewriter:
    """The substitutions for one file, built from what its first entry showed."""

    def __init__(self, first: FirstEntry, sink_global: bytes) -> None:
        refs = first.key_refs
        action = re.escape(refs["action"])
        addr = re.escape(refs["addr"]) if "addr" in refs else b""
        value_ref = rb"(?:h.|j....)"
        self.sink_global = sink_global
        self._subs: list[tuple[re.Pattern, bytes]] = [
            (re.compile(rb"\]\x94(?=\(?\}\x94\(" + action + rb")", re.DOTALL), _literal(sink_global + b"\x94")),
        ]
        # Plain byte replacement is several times faster than re.sub with this many matches;
        # it is used when the literal is long enough to carry its own context.
        self._replacements: list[tuple[bytes, bytes]] = []
        if len(refs["action"]) == 5:
            self._replacements.append((b"}\x94(" + refs["action"], b"}" + _DROPPED_MEMO + b"(" + refs["action"]))
        else:
            self._subs.append((re.compile(rb"\}\x94\((?=" + action + value_ref + addr + rb")", re.DOTALL),
                               _literal(b"}" + _DROPPED_MEMO + b"(")))
        if "compile_context" in refs and "user_metadata" in refs:
            ctx, meta = refs["compile_context"], refs["user_metadata"]
            self._replacements.append((ctx + b"\x8c\x03N/A\x94" + meta, ctx + b"\x8c\x03N/A" + _DROPPED_MEMO + meta))

    def rewrite(self, data: bytes) -> bytes:
        for pattern, replacement in self._subs:
            data = pattern.sub(replacement, data)
        for old, new in self._replacements:
            data = data.replace(old, new)
        return data


def _literal(replacement: bytes) -> bytes:
    # re.sub treats backslashes in a replacement as escapes; double them so it stays literal.
    return replacement.replace(b"\\", b"\\\\")


def rewritten_chunks(rewriter: Rewriter, head: bytes, rest: Iterable[bytes]) -> Iterator[bytes]:
    """Rewrite ``head`` (whatever followed the first entry) and everything after it.

    Chunks are cut just before an entry dict, so no pattern (they all sit around an entry
    start or inside one entry) is split between two chunks.
    """
    pending = bytearray(head)
    for data in rest:
        pending += data
        if len(pending) < CHUNK:
            continue
        cut = _cut_point(pending)
        if cut <= 0:
            continue
        yield rewriter.rewrite(bytes(pending[:cut]))
        del pending[:cut]
    if pending:
        yield rewriter.rewrite(bytes(pending))


def _cut_point(buf: bytearray) -> int:
    cut = buf.rfind(b"}\x94(", len(buf) - CHUNK // 2)
    if cut < 0:
        return len(buf) - 64 if len(buf) > 4 * CHUNK else -1
    if buf[cut - 1:cut] == b"(":
        cut -= 1
    if buf[cut - 2:cut] == b"]\x94":
        cut -= 2
    return cut
