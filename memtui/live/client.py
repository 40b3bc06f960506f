"""The watcher's end of a live socket: a reader thread that keeps a :class:`LiveState`.

As memray's live reader does, the socket is read on a thread of its own and the view asks
for the state when it redraws, so a slow redraw never makes the job wait (the job drops
what the watcher cannot take, and says so). When the job ends or dies, the state keeps
what was last received.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from memtui.errors import UsageError
from memtui.live import protocol as p
from memtui.live.runtime import JobInfo
from memtui.live.state import LiveState


class LiveClient:
    def __init__(self, job: JobInfo, mode: str = p.FULL, keep: int | None = None) -> None:
        self.job = job
        self.mode = mode
        self.state = LiveState() if keep is None else LiveState(keep=keep)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._freeze_ids = 0
        self._changed = threading.Condition()
        self.received = 0  # messages
        self.received_at: dict[str, float] = {}  # kind -> local time the last one arrived

    def connect(self, timeout: float = 2.0) -> LiveClient:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.job.socket)
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot attach to {self.job.name}: {exc.strerror or exc}") from None
        sock.settimeout(None)
        self._sock = sock
        self._send({"kind": p.SUBSCRIBE, "mode": self.mode})
        self._thread = threading.Thread(target=self._read, name=f"memtui-watch-{self.job.pid}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        if self._thread is not None:
            self._thread.join(1.0)
        self.state.end("detached")

    @property
    def ended(self) -> bool:
        return self.state.ended

    def _send(self, message: dict) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.sendall(p.encode(message))
        except OSError:
            return False
        return True

    def _read(self) -> None:
        reader = p.FrameReader()
        sock = self._sock
        reason = "the job went away"
        try:
            while sock is not None:
                data = sock.recv(1 << 20)
                if not data:
                    break
                for message in reader.feed(data):
                    self.received += 1
                    self.received_at[message["kind"]] = time.time()
                    self.state.apply(message)
                    with self._changed:
                        self._changed.notify_all()
        except p.ProtocolError as exc:
            reason = f"the job sent something unreadable ({exc})"
        except OSError:
            pass
        self.state.end(reason)
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate(state)`` holds (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.state):
                left = deadline - time.monotonic()
                if left <= 0 or (self.state.ended and not predicate(self.state)):
                    return predicate(self.state)
                self._changed.wait(min(left, 0.1))
        return True

    def freeze(self, timeout: float = 60.0) -> dict | None:
        """A whole snapshot taken by the job now (without stopping it), or None if it did not come."""
        self._freeze_ids += 1
        ident = self._freeze_ids
        if not self._send({"kind": p.FREEZE, "id": ident}):
            return None
        if not self.wait_for(lambda s: ident in s.frozen, timeout):
            return None
        with self.state.lock:
            return self.state.frozen.pop(ident)


def read_status(job: JobInfo, timeout: float = 2.0) -> dict:
    """The job's counters now, read without asking for its trace (cheap for the job)."""
    client = LiveClient(job, mode=p.COUNTERS_ONLY).connect(timeout)
    try:
        client.wait_for(lambda s: bool(s.samples) or s.ended, timeout)
        sample = client.state.latest()
    finally:
        client.close()
    devices = []
    for d in sample.devices if sample else []:
        devices.append({"device": d.device, "allocated": d.allocated, "reserved": d.reserved, "active": d.active,
                        "peak_allocated": d.peak_allocated, "limit": d.limit, "headroom": d.headroom,
                        "device_free": d.device_free, "device_total": d.device_total, "ooms": d.ooms})
    return {"pid": job.pid, "rank": job.rank, "job": job.job, "argv": job.argv,
            "running_seconds": round(job.running_for(), 1), "time": sample.t if sample else None,
            "devices": devices}
