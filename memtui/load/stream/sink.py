"""The unpickler side of the streaming decoder: trace sinks and the one global they need.

The rewritten stream names a sink with a GLOBAL whose name carries a random nonce made
for this load, so a file cannot name it: every global a file itself contains is refused
exactly as the plain loader refuses it. A sink only passes batches of entry dicts on to
its consumer, which accepts plain values only; a file that reached a sink anyway could do
nothing with it but describe trace entries.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Protocol

from memtui.errors import UnsafeSnapshotError
from memtui.load.stream.errors import StreamFallback

SINK_MODULE = "memtui.load.stream"


class BatchConsumer(Protocol):
    def add_batch(self, entries: list) -> None: ...


class TraceSink:
    """Stands where a device trace's list would be; each APPENDS batch goes to ``consumer``."""

    __slots__ = ("device", "consumer")

    def __init__(self, device: int, consumer: BatchConsumer) -> None:
        self.device = device
        self.consumer = consumer

    def extend(self, entries: list) -> None:
        try:
            self.consumer.add_batch(entries)
        except MemoryError:
            raise
        except Exception as exc:  # the consumer refused a value: the plain path decides
            raise StreamFallback(f"device {self.device} trace: {exc}") from None

    def append(self, entry: object) -> None:
        self.extend([entry])


def new_sink_name() -> str:
    """A name for this load's sink that no file can know in advance."""
    return f"trace_sink_{os.urandom(16).hex()}"  # as secrets.token_hex, without importing it


def global_opcode(sink_name: str) -> bytes:
    """The GLOBAL opcode that makes the next sink."""
    return f"c{SINK_MODULE}\n{sink_name}\n".encode()


class StreamingUnpickler(pickle.Unpickler):
    """Refuses every global and persistent id, except this load's own sink name."""

    def __init__(self, file, sink_name: str, make_consumer: Callable[[int], BatchConsumer]) -> None:
        super().__init__(file)
        self._sink_name = sink_name
        self._make_consumer = make_consumer
        self.sinks: list[TraceSink] = []

    def find_class(self, module: str, name: str):  # noqa: D102 - see class docstring
        if module == SINK_MODULE and name == self._sink_name:
            sink = TraceSink(len(self.sinks), self._make_consumer(len(self.sinks)))
            self.sinks.append(sink)
            return sink
        raise UnsafeSnapshotError(
            f"refused: the file asks to import {module}.{name}; a memory snapshot never "
            "needs code, so nothing was run"
        )

    def persistent_load(self, pid):  # noqa: D102
        raise UnsafeSnapshotError("refused: the file uses pickle persistent ids, which snapshots never do")
