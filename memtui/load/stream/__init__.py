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
from memtui.load.source import ProgressFn, inspect_source, open_decompressed
from memtui.load.stream.check import detach_traces
from memtui.load.stream.errors import StreamFallback
from memtui.load.stream.header import find_first_entry
from memtui.load.stream.rewrite import Rewriter, rewritten_chunks
from memtui.load.stream.sink import BatchConsumer, StreamingUnpickler, TraceSink
from memtui.load.stream.unframe import unframed_chunks

__all__ = ["StreamFallback", "stream_snapshot"]

_HEADER_LIMIT = 256 << 20  # segments this large are unheard of; the plain path can have them


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
    relay = _ProgressRelay(progress) if progress is not None else None
    try:
        stream = open_decompressed(info, relay)
    except OSError as exc:
        raise StreamFallback(f"cannot open ({exc})") from None
    with stream:
        reader = _ChunkReader()
        unpickler = StreamingUnpickler(io.BufferedReader(reader, 1 << 20), make_consumer)
        try:
            reader.chunks = _stream_chunks(unframed_chunks(stream), unpickler.sink_global)
            obj = unpickler.load()
        except StreamFallback:
            raise
        except MemoryError:
            raise SnapshotError(f"{os.path.basename(info.path)}: not enough memory to read this file") from None
        except Exception as exc:  # corrupt, truncated or hostile: the plain path says which
            if relay is not None and relay.error is not None:
                raise relay.error from None  # the caller's own progress callback stopped the load
            raise StreamFallback(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return detach_traces(obj, unpickler.sinks, token_type), unpickler.sinks


def _stream_chunks(chunks: Iterator[bytes], sink_global: bytes) -> Iterator[bytes]:
    buf = bytearray()
    want = 1 << 16
    first = None
    for chunk in chunks:
        buf += chunk
        if len(buf) >= want:
            first = find_first_entry(bytes(buf))
            if first is not None:
                break
            want = 2 * len(buf)
            if len(buf) > _HEADER_LIMIT:
                raise StreamFallback("no trace entry in the first 256 MiB")
    else:
        first = find_first_entry(bytes(buf))
        if first is None:
            raise StreamFallback("the pickle ends inside its first trace entry")
    yield bytes(buf[:first.list_pos]) + sink_global + bytes(buf[first.list_pos + 1:first.end])
    yield from rewritten_chunks(Rewriter(first, sink_global), bytes(buf[first.end:]), chunks)


class _ProgressRelay:
    """Calls the caller's progress callback and remembers what it raised (a cancel), so
    that exception is not mistaken for a decoding failure on its way out of the unpickler."""

    def __init__(self, progress: ProgressFn) -> None:
        self._progress = progress
        self.error: BaseException | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        try:
            self._progress(stage, done, total)
        except BaseException as exc:
            self.error = exc
            raise


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks."""

    def __init__(self) -> None:
        self.chunks: Iterator[bytes] = iter(())
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
