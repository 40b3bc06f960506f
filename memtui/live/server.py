"""The job side of live watching, without torch: a socket, the watchers, the ticks.

A :class:`LiveServer` serves one process on a Unix socket from a daemon thread. What it
serves comes from a *probe* (``counters()``, ``snapshot()``, ``events()``): the torch probe in
:mod:`memtui.record.serving` inside a real job, :class:`memtui.live.replay_source.ReplayProbe`
in tests and demos.

The job comes first:

- every send is non-blocking, and each watcher has a bounded queue; a watcher that does
  not read (hung, stopped, slow terminal) has its queue dropped and is told how many
  updates it missed, then gets a fresh ``state``; the job never waits for it;
- the counters (cheap) go out at every tick; everything else is read only while a watcher
  wants it, and all of it together no more often than keeps its measured cost under
  ``read_budget`` of the wall time;
- where the probe can read the segments alone (``segments()``: torch's snapshot without
  its trace, whose cost does not grow with the history), the segment map and the call
  sites follow at the tick after the counters change, within half the budget; the trace
  (``_snapshot()``, whose cost grows with the recorded history) within the other half, so
  the map is a read or two old and the event log's recorded tail as old as the budget
  makes it (the watcher shows the blocks the map saw come and go meanwhile);
- nothing is read at all while no watcher is attached.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from memtui.live import protocol as p
from memtui.live import wire
from memtui.live.delta import Cursor
from memtui.live.runtime import JobInfo, remove_endpoint, write_descriptor

DEFAULT_INTERVAL = 0.1  # 10 counter updates a second
# At most 0.6% of the wall time spent reading the job's memory, half of it the segments, half
# the trace: with the counters (about 0.1%) it keeps serving a watcher within 1% of a step.
DEFAULT_READ_BUDGET = 0.006
SEGMENTS_SHARE = 0.5
DEFAULT_QUEUE_BYTES = 32 << 20
# Each _snapshot() also records a `snapshot` entry in the job's own ring buffer; reading at
# most twice a second keeps that to two entries a second, within the 0.5 s a view may lag.
MIN_TRACE_INTERVAL = 0.5
SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


class Probe(Protocol):
    def counters(self) -> list[dict]: ...

    def snapshot(self) -> dict: ...

    def events(self) -> list[dict]: ...

    # Optional: ``segments()``, the segments alone (a list), or None where it cannot be had
    # cheaply. A probe without it gets trace reads only.


class Watcher:
    """One connected watcher: its socket, its queue of whole frames, what it missed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()  # kept: a closed socket no longer knows it
        self.mode: str | None = None  # None until it subscribes
        self.in_sync = False  # has a state and every delta since
        self.queue: collections.deque[bytes] = collections.deque()
        self.queued = 0
        self.partial: memoryview | None = None  # the frame being written, never dropped
        self.dropped = 0  # messages dropped since the last `missed`
        self.reader = p.FrameReader(max_message=1 << 20)
        self.freezes: list[int] = []


class ServerStats:
    """What serving has cost the job (the server thread's own CPU time) and sent."""

    def __init__(self) -> None:
        self.ticks = 0
        self.trace_reads = 0
        self.trace_seconds = 0.0  # wall time inside snapshot(), delta and encoding
        self.segment_reads = 0
        self.segment_seconds = 0.0  # wall time inside segments(), packing and encoding
        self.state_seconds = 0.0  # of which packing whole states for watchers that attached
        self.cpu_seconds = 0.0  # the server thread's CPU time, all of it
        self.bytes_sent = 0
        self.dropped = 0
        self.started = time.monotonic()

    def to_json(self) -> dict:
        return {"ticks": self.ticks, "trace_reads": self.trace_reads, "trace_seconds": self.trace_seconds,
                "state_seconds": self.state_seconds,
                "segment_reads": self.segment_reads, "segment_seconds": self.segment_seconds,
                "cpu_seconds": self.cpu_seconds, "bytes_sent": self.bytes_sent, "dropped": self.dropped,
                "uptime": time.monotonic() - self.started}


class LiveServer:
    def __init__(self, probe: Probe, info: JobInfo, *, interval: float = DEFAULT_INTERVAL,
                 read_budget: float = DEFAULT_READ_BUDGET, queue_bytes: int = DEFAULT_QUEUE_BYTES,
                 min_trace_interval: float = MIN_TRACE_INTERVAL,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.probe = probe
        self.info = info
        self.interval = interval
        self.read_budget = read_budget
        self.queue_bytes = queue_bytes
        self.min_trace_interval = max(interval, min_trace_interval)
        self.stats = ServerStats()
        self._on_error = on_error
        self._posted: collections.deque[dict] = collections.deque(maxlen=10_000)
        self._watchers: dict[int, Watcher] = {}
        self._cursor = Cursor()
        self._frames = wire.FrameTable()
        self._next_trace = 0.0
        self._next_segments = 0.0
        self._counted: tuple | None = None  # the counters at the last segments read
        self._segments_alone = callable(getattr(probe, "segments", None))  # else trace reads only
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        for s in (self._wake_r, self._wake_w):
            s.setblocking(False)
        self._selector = selectors.DefaultSelector()

    # -- lifetime ----------------------------------------------------------------------
    def start(self) -> LiveServer:
        path = self.info.socket
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born owner-only: no moment where others may connect
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(8)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        write_descriptor(self.info)
        self._thread = threading.Thread(target=self._run, name="memtui-live", daemon=True)
        self._thread.start()
        return self

    def stop(self, reason: str = "exit", timeout: float = 0.5) -> None:
        """Say goodbye to the watchers (waiting at most ``timeout`` for them), close, remove the socket."""
        if self._thread is None or os.getpid() != self._owner:
            return  # never started, or a forked child: the socket is its parent's
        self.post({"kind": p.BYE, "reason": reason})
        self._stop.set()
        self._wake()
        self._thread.join(timeout + 1.0)
        self._thread = None
        remove_endpoint(self.info.socket)

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    def post(self, message: dict, wake: bool = True) -> None:
        """Queue a message for every watcher (thread-safe, never blocks): steps, OOMs, bye.
        A ``snapshot`` in it is taken out and sent as the trace read at that moment."""
        message.setdefault("t", time.time())
        self._posted.append(message)
        if wake:
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x", SEND_FLAGS)

    # -- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        cpu0 = time.thread_time()
        next_tick = time.monotonic()
        try:
            while not self._stop.is_set():
                timeout = max(0.0, next_tick - time.monotonic())
                for key, events in self._selector.select(timeout):
                    self._handle(key, events)
                self._send_posted()
                now = time.monotonic()
                if now >= next_tick:
                    self._tick(now)
                    next_tick = now + self.interval
                self.stats.cpu_seconds = time.thread_time() - cpu0
            self._send_posted()
            self._flush_all(deadline=time.monotonic() + 0.5)
        except Exception as exc:  # serving must never take the job down
            self._error(f"live serving stopped: {type(exc).__name__}: {exc}")
        finally:
            self._close_all()

    def _error(self, text: str) -> None:
        if self._on_error is not None:
            with contextlib.suppress(Exception):
                self._on_error(text)

    def _handle(self, key: selectors.SelectorKey, events: int) -> None:
        if key.data == "accept":
            self._accept()
        elif key.data == "wake":
            with contextlib.suppress(OSError):
                while self._wake_r.recv(4096):
                    pass
        else:
            watcher = self._watchers.get(key.fd)
            if watcher is None:
                return
            if events & selectors.EVENT_READ:
                self._receive(watcher)
            if events & selectors.EVENT_WRITE and key.fd in self._watchers:
                self._flush(watcher)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        watcher = Watcher(sock)
        self._watchers[sock.fileno()] = watcher
        self._selector.register(sock, selectors.EVENT_READ, "watcher")
        hello = {"kind": p.HELLO, "version": p.VERSION, "interval": self.interval, **self.info.to_json()}
        self._enqueue(watcher, p.encode(hello), p.HELLO)

    def _receive(self, watcher: Watcher) -> None:
        try:
            data = watcher.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(watcher)
            return
        try:
            messages = watcher.reader.feed(data)
        except p.ProtocolError:
            self._drop(watcher)
            return
        for message in messages:
            kind = message.get("kind")
            if kind == p.SUBSCRIBE:
                watcher.mode = p.FULL if message.get("mode") == p.FULL else p.COUNTERS_ONLY
                watcher.in_sync = False
                if watcher.mode == p.FULL:
                    self._next_trace = 0.0  # a new watcher gets its first state at once
            elif kind == p.FREEZE:
                watcher.freezes.append(int(message.get("id", 0)))
        if watcher.freezes:
            self._answer_freezes(watcher)

    def _answer_freezes(self, watcher: Watcher) -> None:
        # A freeze is asked for by a person, once: it is answered at once, whatever the budget.
        snapshot = self.probe.snapshot()
        table = wire.FrameTable()  # a frozen snapshot carries its own frames: it stands alone
        packed = wire.pack_snapshot(snapshot, table)
        for ident in watcher.freezes:
            frame = p.encode({"kind": p.FROZEN, "id": ident, "t": time.time(), "snapshot": packed,
                              "frames": table.frames})
            self._enqueue(watcher, frame, p.FROZEN)
        watcher.freezes.clear()

    def _tick(self, now: float) -> None:
        self.stats.ticks += 1
        subscribed = [w for w in self._watchers.values() if w.mode is not None]
        if not subscribed:
            return
        for message in self.probe.events():
            self._posted.append(message)
        self._send_posted()
        self._seq += 1
        devices = self.probe.counters()
        counters = {"kind": p.COUNTERS, "seq": self._seq, "t": time.time(), "devices": devices,
                    "server": self.stats.to_json()}
        frame = p.encode(counters)
        for w in subscribed:
            self._say_missed(w)
            self._enqueue(w, frame, p.COUNTERS)
        full = [w for w in subscribed if w.mode == p.FULL]
        if full and now >= self._next_trace:
            self._send_trace(full)
            self._counted = self._fingerprint(devices)
        elif full and self._segments_alone and now >= self._next_segments:
            self._send_segments(full, devices)
        self._flush_all()

    @staticmethod
    def _fingerprint(devices: list[dict]) -> tuple:
        return tuple((d.get("device"), d.get("allocated"), d.get("reserved"), d.get("active")) for d in devices)

    def _send_segments(self, full: list[Watcher], devices: list[dict]) -> None:
        """The segments alone, to the watchers in step, when the counters moved since the last read.

        Reading nothing while the counters stand still keeps an idle job's ring buffer free of
        the ``snapshot`` entry torch records at every read; every change of the segments moves
        a counter (an allocation moves ``allocated``, a cache change ``reserved``).
        """
        fingerprint = self._fingerprint(devices)
        if fingerprint == self._counted or not any(w.in_sync for w in full):
            return
        started = time.perf_counter()
        segments = self.probe.segments()  # type: ignore[attr-defined]  # optional: see Probe
        if segments is None:  # this torch cannot read the segments alone: trace reads only
            self._segments_alone = False
            return
        self._counted = fingerprint
        table = self._frames
        table.new_read()
        packed = wire.pack_segments(segments, table)
        first, frames = table.new_frames()
        delta = p.encode({"kind": p.DELTA, "seq": self._seq, "t": time.time(), "frames_from": first,
                          "frames": frames, "segments": packed, "traces": {}, "annotations": [], "gap": False})
        for w in full:
            if w.in_sync:
                self._enqueue(w, delta, p.DELTA)
        cost = time.perf_counter() - started
        self.stats.segment_reads += 1
        self.stats.segment_seconds += cost
        self._next_segments = time.monotonic() + max(self.interval, cost / max(self._share("segments"), 1e-9))

    def _send_trace(self, full: list[Watcher], snapshot: dict | None = None) -> None:
        started = time.perf_counter()
        if snapshot is None:
            snapshot = self.probe.snapshot()
        traces = snapshot.get("device_traces") or []
        new: dict[int, list[dict]] = {}
        gap = False
        for d, trace in enumerate(traces):
            entries, lost = self._cursor.new_items(("trace", d), trace or [])
            gap = gap or lost
            if entries:
                new[d] = entries
        annotations, _ = self._cursor.new_items("annotations", snapshot.get("external_annotations") or [])
        t = time.time()
        table = self._frames
        table.new_read()
        state = None
        state_cost = 0.0
        if any(not w.in_sync and w.queued < self.queue_bytes for w in full):
            packing = time.perf_counter()
            packed = wire.pack_snapshot(snapshot, table)
            state = p.encode({"kind": p.STATE, "seq": self._seq, "t": t, "snapshot": packed,
                              "frames": table.frames[: len(table.frames)]})
            state_cost = time.perf_counter() - packing
        segments = wire.pack_segments(snapshot.get("segments") or [], table)
        traces = {d: wire.pack_entries(entries, table) for d, entries in new.items()}
        first, frames = table.new_frames()
        delta = p.encode({"kind": p.DELTA, "seq": self._seq, "t": t, "frames_from": first, "frames": frames,
                          "segments": segments, "traces": traces, "annotations": annotations, "gap": gap})
        # Without new entries the segments have not changed either (every change of theirs is
        # a trace entry), so an empty delta is not sent at all.
        changed = bool(traces or annotations or gap or frames)
        for w in full:
            if w.in_sync:
                if changed:
                    self._enqueue(w, delta, p.DELTA)
            elif state is not None and w.queued < self.queue_bytes:
                # A whole state, only to a watcher whose queue has room: one that does not read
                # gets none until it has drained what it has.
                self._enqueue(w, state, p.STATE)
                w.in_sync = True
        cost = time.perf_counter() - started
        self.stats.trace_reads += 1
        self.stats.trace_seconds += cost
        self.stats.state_seconds += state_cost
        # Keep the trace's share of the wall time under its half of the budget: a read that
        # cost 20 ms waits about 6.7 s at 0.3%; a cheap one comes every tick. Packing a whole state for a watcher
        # that just attached is paid once per attach, not at every read: it does not make the
        # following reads wait (on an H100 host it took seconds for 100,000 entries, which
        # would have held the next read back for many minutes).
        steady = max(cost - state_cost, 0.0)
        self._next_trace = time.monotonic() + max(self.min_trace_interval, steady / max(self._share("trace"), 1e-9))

    def _share(self, kind: str) -> float:
        """The share of the wall time ``kind`` of read may take: half the budget each, the
        whole of it for the trace where the segments cannot be read alone."""
        if not self._segments_alone:
            return self.read_budget if kind == "trace" else 0.0
        return self.read_budget * (SEGMENTS_SHARE if kind == "segments" else 1 - SEGMENTS_SHARE)

    def _send_posted(self) -> None:
        if not any(w.mode is not None for w in self._watchers.values()):
            # Nobody to tell: steps are forgotten unread (an OOM's snapshot too: no watcher asked).
            self._posted.clear()
            return
        while self._posted:
            message = self._posted.popleft()
            taken = message.pop("snapshot", None)
            frame = p.encode(message)
            for w in list(self._watchers.values()):
                if w.mode is not None:
                    self._enqueue(w, frame, str(message.get("kind")))
            if taken is not None:
                # The message first (the view says at once that memory ran out), then the
                # snapshot taken where it happened (inside the OOM observer) as the next
                # delta, which may take a while to pack, so the map shows the moment itself.
                self._flush_all()
                full = [w for w in self._watchers.values() if w.mode == p.FULL]
                if full:
                    self._send_trace(full, taken)
            elif message.get("kind") == p.OOM:
                self._next_trace = 0.0  # the state at the OOM, as soon as it can be had
        self._flush_all()

    # -- queues --------------------------------------------------------------------------
    def _enqueue(self, w: Watcher, frame: bytes, kind: str = p.COUNTERS) -> bool:
        """Queue ``frame`` unless the watcher's queue is full; False if it was dropped.

        Counters and deltas are dropped when the queue is over its bound (a dropped delta
        leaves the watcher out of step: it gets a fresh state once it has room). Everything
        else is small and rare (hello, steps, OOMs, goodbye) or asked for (a state, a freeze)
        and is queued regardless; a watcher so far behind that its queue passes four times
        the bound is not reading at all, and is let go.
        """
        if kind in (p.COUNTERS, p.DELTA) and w.queued + len(frame) > self.queue_bytes:
            w.dropped += 1
            self.stats.dropped += 1
            if kind == p.DELTA:
                w.in_sync = False
            return False
        if w.queued + len(frame) > 4 * self.queue_bytes:
            self._drop(w)
            return False
        w.queue.append(frame)
        w.queued += len(frame)
        return True

    def _say_missed(self, w: Watcher) -> None:
        if w.dropped:
            frame = p.encode({"kind": p.MISSED, "dropped": w.dropped, "t": time.time()})
            w.dropped = 0
            w.queue.append(frame)
            w.queued += len(frame)

    def _flush_all(self, deadline: float | None = None) -> None:
        for w in list(self._watchers.values()):
            self._flush(w)
        while deadline is not None and time.monotonic() < deadline and any(
                w.queue or w.partial for w in self._watchers.values()):
            for key, events in self._selector.select(0.05):
                if key.data == "watcher" and events & selectors.EVENT_WRITE:
                    w = self._watchers.get(key.fd)
                    if w is not None:
                        self._flush(w)

    def _flush(self, w: Watcher) -> None:
        while True:
            if w.partial is None:
                if not w.queue:
                    break
                frame = w.queue.popleft()
                w.queued -= len(frame)
                w.partial = memoryview(frame)
            try:
                sent = w.sock.send(w.partial, SEND_FLAGS)
            except BlockingIOError:
                break
            except OSError:
                self._drop(w)
                return
            self.stats.bytes_sent += sent
            w.partial = w.partial[sent:] if sent < len(w.partial) else None
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if (w.partial is not None or w.queue) else 0)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.modify(w.sock, want, "watcher")

    def _drop(self, w: Watcher) -> None:
        self._watchers.pop(w.fd, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(w.sock)
        with contextlib.suppress(OSError):
            w.sock.close()

    def _close_all(self) -> None:
        for w in list(self._watchers.values()):
            self._drop(w)
        for s in (self._listener, self._wake_r, self._wake_w):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()
        with contextlib.suppress(Exception):
            self._selector.close()
