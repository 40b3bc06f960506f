"""Serving a job's memory to ``memtui watch``: the torch probe and ``memtui.record.live()``.

The server itself (socket, watchers, queues, ticks) is :mod:`memtui.live.server`, which
knows nothing of torch; this file answers its three questions from inside the job:

- ``counters()``: ``torch.cuda.memory_stats`` (the allocator's counters: their cost does
  not grow with the recorded history) and ``cudaMemGetInfo`` for the headroom, per device
  this process uses;
- ``snapshot()``: ``torch.cuda.memory._snapshot()``, whose cost grows with the history, so
  the server calls it only for a watcher that wants the trace, within its time budget;
- ``segments()``: the allocator's snapshot without its trace (``include_traces`` false, in
  torch since early 2026), whose cost is that of the blocks alive, not of the history: the
  map and the call sites, as often as the counters change; None where torch cannot;
- steps (``memtui.record.step()``) and OOMs (the allocator's OOM observer) are posted the
  moment they happen; at an OOM the snapshot is taken inside the failing allocation, so
  the watcher sees the state that failed.
"""

from __future__ import annotations

import atexit
import os
import sys
import time

from memtui.live.runtime import JobInfo, runtime_dir, socket_path
from memtui.live.server import DEFAULT_INTERVAL, DEFAULT_READ_BUDGET, LiveServer
from memtui.record import backend, oom, steps
from memtui.record.files import launcher_rank
from memtui.record.recording import DEFAULT_MAX_ENTRIES, Options, Session

ENV_VAR = "MEMTUI_LIVE"
BUDGET_VAR = "MEMTUI_LIVE_BUDGET"  # the share of the wall time reading memory may take, e.g. 0.006


def read_budget_from_env(default: float = DEFAULT_READ_BUDGET) -> float:
    try:
        value = float(os.environ.get(BUDGET_VAR, ""))
    except ValueError:
        return default
    return value if 0 < value <= 1 else default


class TorchProbe:
    """The allocator of this process, as the live server asks for it."""

    def __init__(self, torch, home_device: int) -> None:
        self.torch = torch
        self.home = home_device  # the device the job's own thread uses (a rank's LOCAL_RANK)
        self._fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
        # torch.cuda.memory_stats flattens the allocator's nested dict in Python (about 0.1 ms on
        # an H100 host, ten times a second); the nested dict itself is what torch reads it from.
        self._nested = getattr(torch._C, "_cuda_memoryStats", None)
        self._fractions: dict[int, tuple[float, float]] = {}  # device -> (when read, fraction)
        self._devices: tuple[float, list[int]] = (-2.0, [home_device])
        # The C entry point takes (pool id, pool id, include_traces); (0, 0) is every pool.
        # A torch without the flag refuses the triple: then there is no cheap way to the segments.
        self._memory_snapshot = getattr(torch._C, "_cuda_memorySnapshot", None)
        self._segments_alone = self._memory_snapshot is not None

    def _stats(self, d: int) -> dict:
        """``allocated``, ``reserved``, ``active``, ``peak_allocated``, ``ooms``, ``retries`` of device ``d``."""
        if self._nested is not None:
            nested = self._nested(d)
            return {"allocated": nested["allocated_bytes"]["all"]["current"],
                    "reserved": nested["reserved_bytes"]["all"]["current"],
                    "active": nested["active_bytes"]["all"]["current"],
                    "peak_allocated": nested["allocated_bytes"]["all"]["peak"],
                    "ooms": nested.get("num_ooms", 0), "retries": nested.get("num_alloc_retries", 0)}
        flat = self.torch.cuda.memory_stats(d)
        return {"allocated": flat.get("allocated_bytes.all.current", 0),
                "reserved": flat.get("reserved_bytes.all.current", 0),
                "active": flat.get("active_bytes.all.current", 0),
                "peak_allocated": flat.get("allocated_bytes.all.peak", 0),
                "ooms": flat.get("num_ooms", 0), "retries": flat.get("num_alloc_retries", 0)}

    def _fraction_of(self, d: int) -> float:
        """The per-process cap's fraction, read again once a second (it is set once, if ever)."""
        if self._fraction is None:
            return 1.0
        when, value = self._fractions.get(d, (-1.0, 1.0))
        now = time.monotonic()
        if now - when > 1.0:
            value = float(self._fraction(d))
            self._fractions[d] = (now, value)
        return value

    def devices(self) -> list[int]:
        """The home device and any other with memory reserved: asking an unused device for its
        free memory would create a CUDA context there, which costs memory on it."""
        now = time.monotonic()
        if now - self._devices[0] > 1.0:  # which devices hold memory changes seldom: looked at once a second
            found = [self.home]
            count = self.torch.cuda.device_count()
            if count > 1:
                found += [d for d in range(count) if d != self.home and self._stats(d)["reserved"] > 0]
            self._devices = (now, found)
        return self._devices[1]

    def counters(self) -> list[dict]:
        out = []
        for d in self.devices():
            stats = self._stats(d)
            reserved = int(stats["reserved"])
            row = {"device": d, **{k: int(v) for k, v in stats.items()},
                   "limit": None, "device_free": None, "device_total": None}
            try:
                free, total = self.torch.cuda.mem_get_info(d)
                row["device_free"], row["device_total"] = int(free), int(total)
                limit = reserved + int(free)
                fraction = self._fraction_of(d)
                if fraction < 1.0:
                    limit = min(limit, int(total * fraction))
                row["limit"] = limit
            except Exception:  # a device that cannot say; the counters still go out
                pass
            out.append(row)
        return out

    def snapshot(self) -> dict:
        return backend.take_snapshot(self.torch)

    def segments(self) -> list | None:
        if not self._segments_alone:
            return None
        try:
            return list(self._memory_snapshot((0, 0, False))["segments"])
        except (TypeError, RuntimeError, KeyError):
            self._segments_alone = False
            return None

    def events(self) -> list[dict]:
        return []  # steps and OOMs are posted by their own hooks, the moment they happen


def job_id(environ=os.environ) -> str:
    """What the ranks of one launch share: torchrun's run id, else the launcher's pid."""
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return run_id
    if launcher_rank(environ) is not None:
        return f"launch-{os.getppid()}"
    return str(os.getpid())


def _world_size(environ=os.environ) -> int | None:
    value = environ.get("WORLD_SIZE", "")
    return int(value) if value.isdigit() else None


class LiveSession:
    """A running live server for this process; ``stop()`` ends it (also run at exit)."""

    def __init__(self, server: LiveServer, session: Session) -> None:
        self.server = server
        self._session = session
        self._pid = os.getpid()
        self.path = server.info.socket
        steps.add_listener(self._on_step)
        oom.add_listener(self._on_oom)
        atexit.register(self.stop)

    def _on_step(self, n: int) -> None:
        # Steps go out with the next tick (at most 0.1 s later): waking the server at every
        # step would cost the job a thread switch per step.
        self.server.post({"kind": "step", "n": n}, wake=False)

    def _on_oom(self, device: int, requested: int, device_allocated: int, device_free: int) -> None:
        message = {"kind": "oom", "device": device, "requested": requested, "device_allocated": device_allocated,
                   "device_free": device_free, "t": time.time()}
        if self.server.watchers:
            # The job is failing anyway; the state that failed is worth one snapshot, taken here
            # before the exception unwinds and frees what it held.
            message["snapshot"] = self.server.probe.snapshot()
        self.server.post(message)

    def stop(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child (a DataLoader worker) must not close its parent's socket
        steps.remove_listener(self._on_step)
        oom.remove_listener(self._on_oom)
        self.server.stop()
        self._session.stop()
        global _current
        if _current is self:
            _current = None


_current: LiveSession | None = None


def live(*, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = "python", context: str | None = "all",
         interval: float = DEFAULT_INTERVAL, read_budget: float | None = None,
         argv: list[str] | None = None) -> LiveSession:
    """Serve this process's CUDA memory to ``memtui watch`` (recording history if nothing does yet).

    ``read_budget`` is the share of the wall time reading the job's memory (the segments and
    the trace, half each) may cost (default 0.6%, or
    ``MEMTUI_LIVE_BUDGET``); ``argv`` is the command line watchers are shown (default:
    ``sys.argv``; ``memtui run`` passes the script's, which it sets only when the script
    starts). Returns the running :class:`LiveSession` (one per process: a second call returns
    the first). Serving stops at exit, or with ``stop()``.
    """
    global _current
    if _current is not None:
        return _current
    torch = backend.cuda_torch()
    session = Session(Options(max_entries, stacks, context))
    session.start()
    pid = os.getpid()
    rank = launcher_rank()
    home = int(torch.cuda.current_device())
    info = JobInfo(pid=pid, socket=socket_path(runtime_dir(), pid, rank), rank=rank, world_size=_world_size(),
                   devices=[home], started=time.time(), argv=list(sys.argv if argv is None else argv), job=job_id(),
                   host=os.uname().nodename)
    budget = read_budget if read_budget is not None else read_budget_from_env()
    probe = TorchProbe(torch, home)
    # Once here, in the job's own thread: whatever torch imports on a first call is imported now,
    # not later in the server's thread while the job's thread may be importing too.
    probe.counters()
    server = LiveServer(probe, info, interval=interval, read_budget=budget,
                        on_error=lambda text: print(f"memtui: {text}", file=sys.stderr, flush=True))
    server.start()
    _current = LiveSession(server, session)
    return _current


def current() -> LiveSession | None:
    return _current
