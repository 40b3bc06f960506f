"""The rewriting steps in a helper process, so they run on a second core.

``python -m memtui.load.stream.producer FILE SINK_GLOBAL_HEX`` writes records to
stdout: an 8-byte count of the file's bytes consumed so far, a 4-byte length, then that
many bytes of the rewritten stream. A length of 0xFFFFFFFF carries the reason the file
must go to the plain path instead. The loading process (see :class:`ProducerReader`)
turns the records back into a stream and the counts into progress.
"""

from __future__ import annotations

import io
import os
import struct
import sys
from collections.abc import Callable

import memtui
from memtui.load.stream.errors import StreamFallback

_RECORD = struct.Struct("<QI")
_FAILED = 0xFFFFFFFF


def produce(path: str, sink_global: bytes, out) -> None:
    from memtui.load.stream.pipeline import rewritten_file

    consumed = [0]

    def progress(stage: str, done: int, total: int) -> None:
        consumed[0] = done

    try:
        for chunk in rewritten_file(path, sink_global, progress):
            out.write(_RECORD.pack(consumed[0], len(chunk)))
            out.write(chunk)
    except StreamFallback as exc:
        reason = str(exc).encode()
        out.write(_RECORD.pack(consumed[0], _FAILED) + struct.pack("<I", len(reason)) + reason)
    except Exception as exc:  # corrupt compressed data and the like: the plain path reports it
        reason = f"{type(exc).__name__}: {exc}"[:300].encode()
        out.write(_RECORD.pack(consumed[0], _FAILED) + struct.pack("<I", len(reason)) + reason)
    out.flush()


class ProducerReader(io.RawIOBase):
    """The rewritten stream, read from a producer process started on ``path``."""

    def __init__(self, path: str, sink_global: bytes, total: int, progress: Callable | None) -> None:
        # The child imports this package from wherever the parent did, installed or not.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(memtui.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        import subprocess  # here: only this fallback starts a process, and the import is not free

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "memtui.load.stream.producer", path, sink_global.hex()],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env,
        )
        self._pipe = io.BufferedReader(self._proc.stdout, 1 << 20)
        self._total = total
        self._progress = progress
        self._chunk = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._chunk:
            if self._done or not self._next_record():
                return 0
        n = min(len(buffer), len(self._chunk))
        buffer[:n] = self._chunk[:n]
        self._chunk = self._chunk[n:]
        return n

    def _next_record(self) -> bool:
        head = self._pipe.read(_RECORD.size)
        if len(head) < _RECORD.size:
            self._done = True
            self._proc.wait()
            if self._proc.returncode:
                raise StreamFallback(f"the producer process stopped (exit {self._proc.returncode})")
            return False
        consumed, length = _RECORD.unpack(head)
        if length == _FAILED:
            (size,) = struct.unpack("<I", self._pipe.read(4))
            raise StreamFallback(self._pipe.read(size).decode(errors="replace"))
        self._chunk = memoryview(self._pipe.read(length))
        if self._progress is not None:
            self._progress("reading", consumed, self._total)
        return True

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._pipe.close()
        super().close()


def main() -> int:
    produce(sys.argv[1], bytes.fromhex(sys.argv[2]), sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
