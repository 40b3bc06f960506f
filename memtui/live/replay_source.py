"""A live source without a GPU: a recorded snapshot played back at speed through the real server.

:class:`ReplayProbe` answers the server as the torch probe does inside a job: counters at
every tick, the trace recorded so far when asked, steps and OOMs as they come. Entries are
revealed ``rate`` a second. A recording holds its segments only as they were at its end, so
before the end a replayed ``_snapshot()`` carries the segments the model's replay gives
after the entries revealed so far (memtui/live/replay_state.py), and at the end the file's own.

``python -m memtui.live.replay_source SNAP [--rate N] [--loop] [--ranks N]`` serves one the
way a job does (in the live folder, found by ``memtui watch``); the tests use it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from memtui.live import protocol as p
from memtui.live.runtime import JobInfo, runtime_dir, socket_path
from memtui.live.server import LiveServer

STEP_PREFIX = "memtui.step#"
GROWS = {"alloc": 1, "free_completed": -1}
RESERVES = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


class ReplayProbe:
    def __init__(self, raw: dict, rate: float = 1000.0, loop: bool = False, clock=time.monotonic) -> None:
        self.raw = raw
        self.rate = rate
        self.loop = loop
        self._clock = clock
        self._t0 = clock()
        traces = raw.get("device_traces") or []
        self.traces = [list(t or []) for t in traces]
        self.length = max((len(t) for t in self.traces), default=0)
        self._annotations = sorted(raw.get("external_annotations") or [], key=lambda a: a.get("time_us") or 0)
        self._base = [self._baseline(d) for d in range(len(self.traces))]
        self._lock = threading.Lock()
        self._counted = 0  # entries already folded into the running counters
        self._running = [[a, r] for a, r in self._base]
        self._peak = [a for a, _ in self._base]
        self._ooms = [0] * len(self.traces)
        self._told = 0  # entries already looked at for steps and OOMs
        self._told_annotations = 0
        self._segments_at = None  # memtui.live.replay_state.SegmentsAt, made at the first read

    def _baseline(self, d: int) -> tuple[int, int]:
        """Allocated and reserved before the trace's first entry: the end state less the trace's changes."""
        allocated = reserved = 0
        for seg in self.raw.get("segments") or []:
            if seg.get("device", 0) != d:
                continue
            reserved += int(seg.get("total_size") or 0)
            allocated += sum(int(b.get("size") or 0) for b in seg.get("blocks") or []
                             if b.get("state") == "active_allocated")
        for e in self.traces[d]:
            allocated -= GROWS.get(e.get("action"), 0) * int(e.get("size") or 0)
            reserved -= RESERVES.get(e.get("action"), 0) * int(e.get("size") or 0)
        return max(allocated, 0), max(reserved, 0)

    def revealed(self) -> int:
        """How many entries of each trace have happened by now."""
        n = int((self._clock() - self._t0) * self.rate)
        if self.loop and self.length and n >= self.length:
            self._restart()
            n = 0
        return min(n, self.length)

    def _restart(self) -> None:
        with self._lock:
            self._t0 = self._clock()
            self._counted = self._told = self._told_annotations = 0
            self._running = [[a, r] for a, r in self._base]

    def _advance(self, n: int) -> None:
        with self._lock:
            for d, trace in enumerate(self.traces):
                for e in trace[self._counted:n]:
                    size = int(e.get("size") or 0)
                    self._running[d][0] += GROWS.get(e.get("action"), 0) * size
                    self._running[d][1] += RESERVES.get(e.get("action"), 0) * size
                    self._peak[d] = max(self._peak[d], self._running[d][0])
                    if e.get("action") == "oom":
                        self._ooms[d] += 1
            self._counted = max(self._counted, n)

    # -- the probe -------------------------------------------------------------------------
    def counters(self) -> list[dict]:
        self._advance(self.revealed())
        out = []
        for d in range(len(self.traces)):
            allocated, reserved = self._running[d]
            limit = self._limit(d, reserved)
            out.append({"device": d, "allocated": allocated, "reserved": reserved, "active": allocated,
                        "peak_allocated": self._peak[d], "limit": limit, "device_free": None,
                        "device_total": None, "ooms": self._ooms[d], "retries": 0})
        return out

    def _limit(self, d: int, reserved: int) -> int | None:
        # A replayed device has no free figure but at an OOM: the limit it ran into.
        for e in self.traces[d][: self._counted]:
            if e.get("action") == "oom" and e.get("device_free") is not None:
                return reserved + int(e["device_free"])
        return None

    def snapshot(self) -> dict:
        n = self.revealed()
        self._advance(n)
        horizon = self._horizon(n)
        return {"segments": self._segments(n),
                "device_traces": [t[:n] for t in self.traces],
                "external_annotations": [a for a in self._annotations if (a.get("time_us") or 0) <= horizon],
                "allocator_settings": self.raw.get("allocator_settings") or {}}

    def _segments(self, n: int) -> list[dict]:
        """The file's own segments at its end; before that, the replay's (memtui/live/replay_state.py)."""
        if n >= self.length:
            return self.raw.get("segments") or []
        if self._segments_at is None:
            from memtui.live.replay_state import SegmentsAt

            self._segments_at = SegmentsAt(self.raw)
        return self._segments_at.at(n)

    def _horizon(self, n: int) -> float:
        if n >= self.length:
            return float("inf")  # the end of the recording: annotations made after its last entry too
        times = [t[n - 1].get("time_us") or 0 for t in self.traces if 0 < n <= len(t)]
        return max(times) if times else float("-inf")

    def events(self) -> list[dict]:
        """Steps and OOMs revealed since the last call, as the job would post them."""
        n = self.revealed()
        out = []
        for d, trace in enumerate(self.traces):
            for e in trace[self._told:n]:
                if e.get("action") == "oom":
                    out.append({"kind": p.OOM, "device": d, "requested": int(e.get("size") or 0),
                                "device_free": e.get("device_free"), "t": time.time()})
        self._told = max(self._told, n)
        horizon = self._horizon(n)
        while self._told_annotations < len(self._annotations):
            a = self._annotations[self._told_annotations]
            if (a.get("time_us") or 0) > horizon:
                break
            self._told_annotations += 1
            name = str(a.get("name") or "")
            if a.get("stage") == "START" and name.startswith(STEP_PREFIX) and name[len(STEP_PREFIX):].isdigit():
                out.append({"kind": p.STEP, "n": int(name[len(STEP_PREFIX):]), "t": time.time()})
        return out


def serve_replay(path: str, rate: float = 1000.0, loop: bool = False, rank: int | None = None,
                 interval: float = 0.1, folder: str | None = None, job: str | None = None,
                 read_budget: float = 1.0) -> LiveServer:
    """Start serving ``path`` as a live job of this process; returns the running server.

    A replay has no training loop to protect, so its trace may be read at every tick
    (``read_budget`` 1.0); a test of the budget passes its own."""
    from memtui.load.read import read_snapshot

    raw = read_snapshot(path)
    folder = folder or runtime_dir()
    pid = os.getpid()
    info = JobInfo(pid=pid, socket=socket_path(folder, pid, rank), rank=rank,
                   devices=list(range(len(raw.get("device_traces") or []))), started=time.time(),
                   argv=[path], job=job or str(pid), host=os.uname().nodename)
    # A replay records no `snapshot` entries of its own, so its trace may be read at every tick.
    return LiveServer(ReplayProbe(raw, rate, loop), info, interval=interval, read_budget=read_budget,
                      min_trace_interval=0.0).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memtui.live.replay_source",
                                     description="Serve a recorded snapshot as if it were a live job.")
    parser.add_argument("snapshot")
    parser.add_argument("--rate", type=float, default=1000.0, help="trace entries a second (default 1000)")
    parser.add_argument("--loop", action="store_true", help="start again at the end")
    parser.add_argument("--ranks", type=int, default=1, help="serve this many ranks of one job (default 1)")
    parser.add_argument("--linger", type=float, default=None,
                        help="seconds to keep serving after the end (default: until killed)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ranks = [None] if args.ranks <= 1 else list(range(args.ranks))
    job = f"replay-{os.getpid()}"
    # Ranks of a replayed job run at slightly different speeds, so they differ as real ranks do.
    servers = [serve_replay(args.snapshot, args.rate * (1 + 0.25 * (r or 0)), args.loop, rank=r, job=job)
               for r in ranks]
    print(f"serving {args.snapshot} as pid {os.getpid()}", flush=True)
    try:
        probe = servers[0].probe
        while args.loop or probe.revealed() < probe.length:
            time.sleep(0.05)
        if args.linger is None:
            while True:
                time.sleep(3600)
        time.sleep(args.linger)
    except KeyboardInterrupt:
        pass
    finally:
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
