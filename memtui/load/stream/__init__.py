"""Streaming decoder: a snapshot's traces go straight into columns, never into a list of dicts.

``pickle.load`` of a 10M-event snapshot holds ten million entry dicts at once (5 GB).
Here the C unpickler is kept (it is fast, and refusing globals keeps it safe) but fed a
rewritten opcode stream: the frames are stripped (unframe.py), the part before the first
trace entry is walked to learn how entries spell their keys (header.py), and the rest is
rewritten so each device trace is a sink and entry dicts are not memoized (rewrite.py).
The sink hands every APPENDS batch to a consumer (the model's TraceBuilder), which keeps
columns and lets the dicts go. Anything unexpected raises StreamFallback, and the caller
reads the file with the plain path instead: the result is the same model or the same error.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator

from memtui.errors import SnapshotError
from memtui.load.changes import check_unchanged, file_state
from memtui.load.limits import InflationRefused
from memtui.load.progress_relay import ProgressRelay
from memtui.load.source import ProgressFn, SourceInfo, inspect_source, memory_error_message, open_unguarded
from memtui.load.stream.check import detach_traces
from memtui.load.stream.errors import StreamFallback
from memtui.load.stream.pipeline import rewritten_file
from memtui.load.stream.producer import ProducerReader
from memtui.load.stream.sink import BatchConsumer, StreamingUnpickler, TraceSink, global_opcode, new_sink_name

__all__ = ["StreamFallback", "stream_snapshot"]


def stream_snapshot(
    path: str | os.PathLike,
    make_consumer: Callable[[int], BatchConsumer],
    token_type: type,
    progress: ProgressFn | None = None,
) -> tuple[dict, list[TraceSink]]:
    """Decode ``path``, sending the n-th non-empty trace's entries to ``make_consumer(n)``.

    Returns the snapshot dict with empty device traces (their content went to the
    consumers) and the sinks, each with its ``device`` and ``consumer``. ``token_type``
    is the type the consumers put in frame lists they have interned, which must not be
    seen anywhere else. Raises StreamFallback when the file is not one this decoder handles.
    """
    info = inspect_source(path)
    if not _starts_framed(info):  # JSON, an export, an old protocol: no helper process for those
        raise StreamFallback("not a protocol 4 or 5 pickle")
    before = file_state(info.path)
    relay = ProgressRelay(progress) if progress is not None else None
    sink_name = new_sink_name()
    sink_global = global_opcode(sink_name)
    if _use_helper_process(info):
        reader: io.RawIOBase = ProducerReader(info.path, sink_global, info.size, relay)
    else:
        reader = _ChunkReader(rewritten_file(info.path, sink_global, relay))
    with io.BufferedReader(reader, 1 << 20) as stream:
        unpickler = StreamingUnpickler(stream, sink_name, make_consumer)
        try:
            obj = unpickler.load()
        except (StreamFallback, InflationRefused):
            raise
        except MemoryError:
            raise SnapshotError(memory_error_message(info, os.path.basename(info.path))) from None
        except Exception as exc:  # corrupt, truncated or hostile: the plain path says which
            if relay is not None and relay.error is not None:
                raise relay.error from None  # the caller's own progress callback stopped the load
            raise StreamFallback(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    check_unchanged(info.path, before, os.path.basename(info.path))
    return detach_traces(obj, unpickler.sinks, token_type), unpickler.sinks


def _starts_framed(info: SourceInfo) -> bool:
    """Whether the decompressed content starts like a protocol 4 or 5 pickle (PROTO 4/5)."""
    try:
        with open_unguarded(info) as stream:
            head = stream.read(2)
    except Exception:  # unreadable or corrupt: the pipeline (then the plain path) says why
        return True
    return head[:1] == b"\x80" and head[1:2] in (b"\x04", b"\x05")


# Below this size a second process costs more to start than it saves.
HELPER_PROCESS_MIN_BYTES = 32 << 20
use_helper_process = True  # tests switch it off or on to cover both ways


def _use_helper_process(info) -> bool:
    return use_helper_process and info.size >= HELPER_PROCESS_MIN_BYTES and (os.cpu_count() or 1) > 1


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self._chunk = b""
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pos >= len(self._chunk):
            try:
                self._chunk = next(self.chunks)
            except StopIteration:
                return 0
            self._pos = 0
        n = min(len(buffer), len(self._chunk) - self._pos)
        buffer[:n] = self._chunk[self._pos:self._pos + n]
        self._pos += n
        return n
