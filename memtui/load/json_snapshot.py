"""Snapshots written as JSON: ``json.dump`` of the snapshot dict, or ``memtui convert -o x.json``.

The format is recognised by content, never by file name: after an optional UTF-8 byte
order mark and whitespace, the first byte is ``{`` or ``[``. No pickle opcode is either
of those bytes, and a memtui export starts with a msgpack map byte, so the three never
overlap. Compression is handled before this module sees a byte (source.py).

JSON has no streaming parser in the standard library, so the text is read whole. Before
anything is built from it, limits.py bounds it the way the pickle path is bounded: the
total text after decompression, the inflation of a compressed file, the nesting depth
and the number of containers per byte (:class:`memtui.load.limits.JsonStructure`, which
measures the text as it arrives, so a nesting bomb is refused after its first pieces).
Every failure is a one-line :class:`SnapshotError`.
"""

from __future__ import annotations

import json

from memtui.errors import SnapshotError
from memtui.load.limits import MAX_JSON_BYTES, GuardedStream, JsonStructure
from memtui.units import format_bytes

_BOM = b"\xef\xbb\xbf"
_SPACE = b" \t\r\n"


def looks_like_json(head: bytes) -> bool:
    """True when ``head`` (the first decompressed bytes) starts a JSON object or array."""
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    head = head.lstrip(_SPACE)
    return head[:1] in (b"{", b"[")


def load_json(stream: GuardedStream, description: str) -> object:
    """The JSON value in ``stream``, within the limits; every failure is a SnapshotError."""
    structure = JsonStructure(description)
    try:
        data = stream.read_all(MAX_JSON_BYTES, "JSON text", structure.feed)
    except MemoryError:
        raise SnapshotError(f"{description}: not enough memory to read this file (JSON is read whole)") from None
    structure.finish()
    if data.startswith(_BOM):
        del data[:len(_BOM)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{description}: not readable JSON (not UTF-8 text at byte {exc.start:,})") from None
    except MemoryError:
        raise SnapshotError(f"{description}: not enough memory to read this file "
                            f"({format_bytes(len(data))} of JSON text)") from None
    size = len(data)
    del data
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string") or _only_space_after(text, exc.pos):
            raise SnapshotError(f"{description}: truncated JSON (the file ends before the snapshot does)") from None
        raise SnapshotError(f"{description}: not readable JSON ({exc.msg} at line {exc.lineno:,}, "
                            f"column {exc.colno:,})") from None
    except RecursionError:  # the depth check above makes this unreachable; kept as a backstop
        raise SnapshotError(f"{description}: structure nested too deeply to be a memory snapshot") from None
    except MemoryError:
        raise SnapshotError(f"{description}: not enough memory to read this file "
                            f"({format_bytes(size)} of JSON text)") from None
    except ValueError as exc:  # an integer of more digits than Python converts, and the like
        text_of = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise SnapshotError(f"{description}: not readable JSON ({text_of})") from None


def _only_space_after(text: str, pos: int) -> bool:
    # A parse that fails with nothing but whitespace left has run out of file.
    return len(text) - pos < 1 << 16 and not text[pos:].strip()
