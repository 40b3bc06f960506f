"""The live protocol: what a job serves on its socket and what a watcher sends back.

Each message is one msgpack map, framed by a 4-byte big-endian length. msgpack, not
pickle: a watcher decodes data only, never code, whoever is at the other end.

Job → watcher, in order:

- ``hello``: who is serving (pid, rank, devices, start time, command line);
- ``counters`` at every tick (10 a second by default): the allocator's counters per device,
  cheap to take whatever the length of the recorded history;
- ``state`` once, after a ``subscribe`` asking for ``full``: the snapshot as
  ``torch.cuda.memory._snapshot()`` returns it;
- ``delta`` after that: only the trace entries and annotations recorded since the last
  one, and the segments as they are now;
- ``step``, ``oom`` the moment they happen; ``missed`` when the watcher fell behind and
  updates were dropped for it (a fresh ``state`` follows); ``frozen``, the answer to a
  ``freeze``: a whole snapshot taken at that moment; ``bye`` when the job ends.

Watcher → job: ``subscribe`` (``mode``: ``full`` or ``counters``) and ``freeze`` (``id``).
"""

from __future__ import annotations

import struct

import msgpack

VERSION = 1
HEADER = struct.Struct(">I")
# A frozen snapshot of a big ring buffer is the largest message; past this a peer is lying.
MAX_MESSAGE = 1 << 31

HELLO = "hello"
COUNTERS = "counters"
STATE = "state"
DELTA = "delta"
STEP = "step"
OOM = "oom"
MISSED = "missed"
FROZEN = "frozen"
BYE = "bye"
SUBSCRIBE = "subscribe"
FREEZE = "freeze"

FULL = "full"
COUNTERS_ONLY = "counters"


class ProtocolError(Exception):
    """The peer sent something that is not a live-protocol message."""


def encode(message: dict) -> bytes:
    """One framed message."""
    body = msgpack.packb(message, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> dict:
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types for damaged data
        raise ProtocolError(f"undecodable message ({type(exc).__name__})") from None
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        raise ProtocolError("a message without a kind")
    return message


class FrameReader:
    """Turns the bytes received, in chunks of any size, into messages."""

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self._buffer = bytearray()
        self._max = max_message

    def feed(self, data: bytes) -> list[dict]:
        self._buffer += data
        out = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            if size > self._max:
                raise ProtocolError(f"a message of {size} bytes is over the limit")
            end = HEADER.size + size
            if len(self._buffer) < end:
                break
            body = bytes(self._buffer[HEADER.size:end])
            del self._buffer[:end]
            out.append(decode_body(body))
        return out

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole message."""
        return len(self._buffer)
