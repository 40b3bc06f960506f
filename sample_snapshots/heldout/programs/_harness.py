"""What every held-out program shares: how it records, and how its truth is measured live.

A program calls ``Harness`` for the things a user's script would do itself (turn history on,
dump a snapshot, set a cap) and for the measurements nobody's script makes (when each step
began and ended, what the garbage collector freed, what was free when an OOM happened). The
program's own style (loops, classes, callbacks) is its own.

Environment: ``HELDOUT_OUT`` (folder for ``NAME.pickle`` and ``NAME.truth.json``),
``HELDOUT_RERUN=1`` (a re-run under other allocator settings: nothing is dumped, only
``NAME.rerun.json`` with whether and where it ran out of memory).
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import sys
import time
import traceback

import torch

MiB = 1 << 20
GiB = 1 << 30


def now_us() -> int:
    return time.time_ns() // 1000


class Harness:
    def __init__(self, name: str, **facts) -> None:
        self.name = name
        self.out = os.environ.get("HELDOUT_OUT", "/tmp/heldout")
        os.makedirs(self.out, exist_ok=True)
        self.rerun = os.environ.get("HELDOUT_RERUN") == "1"
        self.dev = torch.device("cuda")
        self.path = os.path.join(self.out, name + ".pickle")
        self.truth: dict = {"name": name, **facts}
        self.steps: list[dict] = []
        self.history: dict | None = None       # how history was turned on, if it was
        self.window: list[int] = [now_us(), 0]  # the recording window, for the collector's figures
        self.collections: list[dict] = []
        self._gc_before = 0
        self.pid = os.getpid()                  # DataLoader workers inherit the gc callback
        self.ooms: list[dict] = []
        self.dump_at_oom = False
        self.dumped = False
        self.expected_request: int | None = None
        self.cap_bytes: int | None = None
        torch.manual_seed(0)
        gc.callbacks.append(self._gc)
        torch.cuda.init()
        torch._C._cuda_attach_out_of_memory_observer(self._observe)

    # ------------------------------------------------------------------ what a script does

    def record(self, enabled: str = "all", context: str | None = "all", stacks: str = "python",
               max_entries: int = 200_000) -> None:
        """``torch.cuda.memory._record_memory_history`` as a user calls it."""
        self.history = {"enabled": enabled, "context": context, "stacks": stacks, "max_entries": max_entries}
        self.window[0] = now_us()
        if self.rerun:
            return
        torch.cuda.memory._record_memory_history(enabled=enabled, context=context, stacks=stacks,
                                                 max_entries=max_entries)

    def stop_recording(self) -> None:
        if not self.rerun:
            torch.cuda.memory._record_memory_history(enabled=None)

    def cap(self, gib: float) -> None:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = gib * GiB / total
        torch.cuda.set_per_process_memory_fraction(fraction)
        self.cap_bytes = int(fraction * float(total))
        self.truth["cap_bytes"] = self.cap_bytes

    def dump(self) -> None:
        """``_dump_snapshot`` (history on or off, as the program left it)."""
        self.window[1] = now_us()
        if not self.rerun and not self.dumped:
            torch.cuda.memory._dump_snapshot(self.path)
            self.dumped = True

    def dump_plain(self) -> None:
        """``pickle.dump(torch.cuda.memory._snapshot())``: a snapshot taken with history off."""
        self.window[1] = now_us()
        if not self.rerun and not self.dumped:
            with open(self.path, "wb") as f:
                pickle.dump(torch.cuda.memory._snapshot(), f)
            self.dumped = True

    # ------------------------------------------------------------------ measurements

    def step(self, kind: str = "train"):
        """``with h.step():`` around one training or inference step."""
        return _Step(self, kind)

    def _gc(self, phase: str, info: dict) -> None:
        if os.getpid() != self.pid:
            return
        if phase == "start":
            self._gc_before = torch.cuda.memory_allocated()
            return
        freed = self._gc_before - torch.cuda.memory_allocated()
        if freed > 0:
            self.collections.append({"time_us": now_us(), "generation": info.get("generation"),
                                     "collected": info.get("collected"), "cuda_bytes_freed": freed})

    def _observe(self, device, segment_size, limit, device_free) -> None:
        """At an OOM: what was free in all, and the largest block a request could have used."""
        allocated = torch.cuda.memory_allocated()
        reserved = torch.cuda.memory_reserved()
        free = {"large": 0, "small": 0}
        largest = {"large": 0, "small": 0}
        for seg in torch.cuda.memory_snapshot():
            pool = "small" if seg["segment_type"] == "small" else "large"
            for block in seg["blocks"]:
                if block["state"] == "inactive":
                    free[pool] += block["size"]
                    largest[pool] = max(largest[pool], block["size"])
        cached_free = free["large"] + free["small"]
        headroom = max(0, limit - reserved) if self.cap_bytes else device_free
        served = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
        self.ooms.append({"segment_size": int(segment_size), "limit": int(limit), "device_free": int(device_free),
                          "allocated": allocated, "reserved": reserved, "cached_free": cached_free,
                          "cached_free_by_pool": free, "largest_cached_free_block_by_pool": largest,
                          "headroom": int(headroom),
                          "served_before": int(served), "time_us": now_us()})
        if self.dump_at_oom and not self.rerun and not self.dumped:
            self.dump()

    def expect_request(self, nbytes: int) -> None:
        """The size of the request the program is about to make (for files with no trace)."""
        self.expected_request = nbytes

    # ------------------------------------------------------------------ the truth file

    def finish(self, *, leak: bool, leak_what: str | None = None, workload: str,
               oom_caught: bool | None = None, **extra) -> None:
        self.window[1] = self.window[1] or now_us()
        if self.rerun:
            self._write_rerun()
            return
        if not self.dumped:
            self.dump()
        snap = _load(self.path)
        traces = snap.get("device_traces") or [[]]
        trace = traces[0] if traces else []
        # enabled='state' still leaves a stray entry or two (a snapshot, a free_completed): a
        # trace worth the name has allocations in it.
        has_trace = any(e["action"] == "alloc" for e in trace)
        first_us = trace[0]["time_us"] if has_trace else None
        last_us = trace[-1]["time_us"] if has_trace else None
        hist = self.history or {"enabled": None, "context": None, "stacks": None, "max_entries": None}
        wrapped = bool(has_trace and hist["max_entries"] and len(trace) >= hist["max_entries"])
        # The trace covers a step from its start when history was on before the step began and
        # the ring buffer kept everything since; after a wrap, from the first entry kept.
        covered_from = first_us if wrapped else self.window[0]
        in_trace = partial = 0
        for s in self.steps:
            if not has_trace or s["end_us"] < first_us or s["start_us"] > last_us:
                continue
            if s["start_us"] >= covered_from:
                in_trace += 1
            else:
                partial += 1
        t0, t1 = self.window
        window_gc = [c for c in self.collections if t0 <= c["time_us"] <= t1]
        alloc_series = [s["allocated_at_start"] for s in self.steps if s["kind"] == "train"] or \
                       [s["allocated_at_start"] for s in self.steps]
        per_step = None
        if leak and len(alloc_series) >= 3:
            tail = alloc_series[1:]
            per_step = int((tail[-1] - tail[0]) / max(1, len(tail) - 1))
        truth = dict(self.truth)
        truth.update({
            "workload": " ".join(workload.split()),
            "leak": leak,
            "leak_bytes_per_step": per_step if leak else None,
            "leak_what": leak_what if leak else None,
            "reference_cycles": bool(window_gc),
            "gc_freed_cuda_bytes": sum(c["cuda_bytes_freed"] for c in window_gc),
            "gc_collections_that_freed_cuda": len(window_gc),
            "oom": self._oom_truth(trace),
            "steps": {"ran": len(self.steps), "in_trace": in_trace, "partly_in_trace": partial,
                      "kinds": sorted({s["kind"] for s in self.steps})},
            "allocated_at_step_start": alloc_series,
            "step_times_us": [[s["kind"], s["start_us"], s["end_us"]] for s in self.steps],
            "has_trace": has_trace,
            "trace_entries": len(trace),
            "stacks": hist["stacks"] if hist["enabled"] == "all" or hist["enabled"] == "state" else None,
            "context": hist["context"] if self.history else None,
            "history": self.history,
            "ring_buffer_cut": wrapped,
            "segments_at_dump": len(snap.get("segments", [])),
            "dumped": "at the OOM, by the OOM observer" if self.dump_at_oom and self.ooms else "by the program",
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        })
        if oom_caught is not None:
            truth["oom_caught"] = oom_caught
        truth.update(extra)
        with open(os.path.join(self.out, self.name + ".truth.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
            f.write("\n")

    def _oom_truth(self, trace) -> dict | None:
        if not self.ooms:
            return None
        o = self.ooms[0]
        trace_ooms = [e for e in trace if e["action"] == "oom"]
        if trace_ooms:
            requested, source = trace_ooms[0]["size"], "the trace's oom entry"
        elif self.expected_request and abs(self.expected_request - o["segment_size"]) <= 2 * MiB:
            requested, source = self.expected_request, "the program's own request"
        else:
            requested, source = o["segment_size"], "the segment size torch tried to create (no trace)"
        # Requests up to 1 MiB come from the small pool, larger ones from the large pool; new
        # segments are whole 2 MiB pages, so the cap's headroom counts in whole pages.
        pool = "small" if requested <= MiB else "large"
        pages = o["headroom"] // (2 * MiB) * (2 * MiB)
        usable = o["cached_free_by_pool"][pool] + pages
        free_total = o["cached_free"] + o["headroom"]
        largest = max(o["largest_cached_free_block_by_pool"][pool], pages)
        return {"cause": "capacity" if requested > usable else "fragmentation",
                "cause_rule": "capacity when the request exceeds the free bytes of its pool plus the "
                              "cap's headroom in whole 2 MiB pages (what a defragmented cache could "
                              "give it); fragmentation otherwise, since no single block was large enough",
                "requested": int(requested), "requested_from": source, "segment_size": o["segment_size"],
                "free_total": int(free_total), "free_usable_by_request": int(usable), "pool": pool,
                "cached_free_by_pool": o["cached_free_by_pool"],
                "largest_free_block": int(largest), "headroom_under_limit": o["headroom"],
                "cached_free": o["cached_free"], "allocated": o["allocated"], "reserved": o["reserved"],
                "limit": o["limit"], "served_before": o["served_before"], "ooms_in_run": len(self.ooms),
                "expandable_rerun_passes": None}

    def _write_rerun(self) -> None:
        stats = torch.cuda.memory_stats()
        with open(os.path.join(self.out, self.name + ".rerun.json"), "w") as f:
            json.dump({"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "ooms": self.ooms,
                       "served": stats.get("allocation.all.allocated", 0),
                       "num_ooms": stats.get("num_ooms", 0)}, f, indent=1)


class _Step:
    def __init__(self, h: Harness, kind: str) -> None:
        self.h, self.kind = h, kind

    def __enter__(self):
        self.rec = {"kind": self.kind, "start_us": now_us(), "allocated_at_start": torch.cuda.memory_allocated()}
        return self

    def __exit__(self, *exc) -> bool:
        self.rec["end_us"] = now_us()
        self.rec["completed"] = exc[0] is None
        self.h.steps.append(self.rec)
        return False


def _load(path: str) -> dict:
    with open(path, "rb") as f:
        return pickle.load(f)


def main(programs: dict, argv: list[str] | None = None, env: dict | None = None) -> int:
    """``python PROGRAM.py NAME``: run one program of this file (``--list`` names them, each
    with the environment it must start with, as JSON)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] == "--list":
        for name in programs:
            print(name, json.dumps((env or {}).get(name, {})), sep="\t")
        return 0
    name = argv[0]
    try:
        programs[name](name)
    except Exception:  # noqa: BLE001 - the runner reads the log
        traceback.print_exc()
        return 1
    return 0
