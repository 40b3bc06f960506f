"""Constants of memtui's msgpack export format (see docs/export-format.md).

An export is a msgpack stream whose first object is the header map. The header's first
key is always ``"format"`` with the value ``"memtui"``, so a file can be recognised
from its first bytes without decoding it.
"""

from __future__ import annotations

FORMAT_NAME = "memtui"
FORMAT_VERSION = 1

# msgpack bytes of the header's first pair: fixstr "format", fixstr "memtui".
HEADER_FIRST_PAIR = b"\xa6format\xa6memtui"


def looks_like_export(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a memtui export."""
    if not head:
        return False
    first = head[0]
    if 0x80 <= first <= 0x8F:
        return head[1:].startswith(HEADER_FIRST_PAIR)
    if first == 0xDE:  # map16
        return head[3:].startswith(HEADER_FIRST_PAIR)
    return False
