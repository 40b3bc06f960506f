"""One measurement, in a fresh process so each figure has its own peak RSS.

``bench_child.py MODE FILE CACHE_DIR`` prints one JSON object on its last line.
MODE is ``pickle`` (``pickle.load``), ``viz`` (``torch.cuda._memory_viz stats``),
``cold`` (memtui, empty cache), ``stream`` (the streaming decoder, the fast path's
fallback, no cache), ``plain`` (memtui's plain loader, no cache), ``warm``
(memtui from the cache, then the interactive operations) or ``tui`` (the explorer under
Pilot).
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

START = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = 20


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_pickle(path: str) -> dict:
    import pickle

    t = time.perf_counter()
    with open(path, "rb") as fh:
        obj = pickle.load(fh)
    elapsed = time.perf_counter() - t
    del obj
    return {"time_s": elapsed, "peak_rss": peak_rss()}


def run_viz(path: str) -> dict:
    import runpy

    sys.argv = ["_memory_viz", "stats", path]
    t = time.perf_counter()
    stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        runpy.run_module("torch.cuda._memory_viz", run_name="__main__")
    finally:
        sys.stdout = stdout
    return {"time_s": time.perf_counter() - t, "peak_rss": peak_rss()}


def run_cold(path: str, cache_dir: str, streaming: bool = True, fast: bool = True) -> dict:
    import logging

    import memtui.load.fast
    from memtui.cache.store import ModelCache
    from memtui.open import open_snapshot

    memtui.load.fast.enabled = fast

    fallbacks: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            fallbacks.append(record.getMessage())

    logging.getLogger("memtui.load").addHandler(Catch())
    logging.getLogger("memtui.load").setLevel(logging.DEBUG)
    cache = ModelCache(cache_dir) if cache_dir else None
    base = current_rss()
    t = time.perf_counter()
    snapshot = open_snapshot(path, streaming=streaming, cache=cache)
    elapsed = time.perf_counter() - t
    peak = peak_rss()
    gc.collect()
    out = {"time_s": elapsed, "peak_rss": peak, "resident": current_rss(), "baseline_rss": base,
           "helper_peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
           "events": sum(len(d.trace) for d in snapshot.devices),
           "path": _path_taken(fallbacks, streaming, fast), "fallback": fallbacks[:2]}
    if cache is not None:
        t = time.perf_counter()
        cache.wait()
        out["cache_write_s"] = time.perf_counter() - t
    return out


def _path_taken(fallbacks: list[str], streaming: bool, fast: bool) -> str:
    """Which decoder built the model, from what the loader logged when it fell back."""
    if not streaming or any("plain loader" in f for f in fallbacks):
        return "plain"
    if not fast or any("without the fast path" in f for f in fallbacks):
        return "streaming"
    return "fast (compiled scanner)"


def run_warm(path: str, cache_dir: str) -> dict:
    from memtui.cache.store import ModelCache
    from memtui.open import open_snapshot

    cache = ModelCache(cache_dir)
    t = time.perf_counter()
    snapshot = cache.load(path)
    elapsed = time.perf_counter() - t
    if snapshot is None:
        return {"error": "cache miss"}
    out = {"time_s": elapsed, "resident": current_rss()}
    t = time.perf_counter()
    again = open_snapshot(path, cache=cache)  # through the public entry point too
    out["open_snapshot_s"] = time.perf_counter() - t
    del again
    out.update(interactive(snapshot))
    out["peak_rss"] = peak_rss()
    return out


def interactive(snapshot) -> dict:
    """Time travel, address_n search, filters and export on the largest device."""
    import numpy as np

    from memtui.replay import Replayer

    dev = max(snapshot.devices, key=lambda d: len(d.trace))
    n = len(dev.trace)
    rng = random.Random(1234)
    out: dict = {}

    t = time.perf_counter()
    replayer = Replayer(dev)
    out["replay_index_s"] = time.perf_counter() - t
    out["replay_index_bytes"] = replayer.nbytes
    times = []
    for _ in range(SAMPLES):
        i = rng.randrange(n)
        t = time.perf_counter()
        replayer.state_at(i)
        times.append(time.perf_counter() - t)
    out["state_at_s"] = _summary(times)

    lives = dev.lives
    times = []
    for _ in range(SAMPLES):
        life = rng.randrange(len(lives))
        text = f"{int(lives.addr[life]):x}_{int(lives.version[life])}"
        t = time.perf_counter()
        found = snapshot.find(text)
        times.append(time.perf_counter() - t)
        assert found, text
    out["address_n_search_s"] = _summary(times)

    out.update(_filters(snapshot, dev.device))

    try:
        from memtui.export.writer import export_snapshot
    except ImportError:
        out["export_note"] = "memtui.export not available"
    else:
        rows = np.arange(0, n, 10, dtype=np.int64)
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            export_snapshot(snapshot, os.path.join(tmp, "part.msgpack"), device=dev.device, rows=rows)
            out["export_10pct_s"] = time.perf_counter() - t
            out["export_10pct_bytes"] = os.path.getsize(os.path.join(tmp, "part.msgpack"))
    return out


def _filters(snapshot, device: int) -> dict:
    try:
        from memtui.query import compile_filter
    except ImportError:
        return {"filter_note": "memtui.query not available"}
    out = {}
    column = compile_filter("size>1MiB action:alloc")
    t = time.perf_counter()
    mask = column.mask(snapshot, device)
    out["column_filter_s"] = time.perf_counter() - t
    out["column_filter_hits"] = int(mask.sum())
    name = _frequent_user_file(snapshot, device)
    frame = compile_filter(f"file:{name}")
    t = time.perf_counter()
    mask = frame.mask(snapshot, device)
    out["frame_filter_s"] = time.perf_counter() - t
    out["frame_filter"] = f"file:{name}"
    out["frame_filter_hits"] = int(mask.sum())
    return out


def _frequent_user_file(snapshot, device: int) -> str:
    """The file of the most used Python frame: what a user would filter on."""
    import numpy as np

    stacks = snapshot.stacks
    per_stack = np.bincount(snapshot.devices[device].trace.stack.astype(np.int64) + 1, minlength=len(stacks) + 1)[1:]
    frame_use = np.zeros(len(snapshot.frames), np.int64)
    for sid in np.flatnonzero(per_stack):
        frame_use[stacks.frame_ids(int(sid))] += per_stack[sid]
    frame_use[snapshot.frames.native] = 0
    return os.path.basename(snapshot.frames.filename_of(int(frame_use.argmax())))


def run_tui(path: str, cache_dir: str) -> dict:
    import asyncio

    from memtui.cache.store import ModelCache
    from memtui.tui.app import MemtuiApp
    from memtui.tui.screens.main import MainScreen

    out: dict = {}

    async def drive() -> None:
        app = MemtuiApp(path, show_source=False, cache=ModelCache(cache_dir))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            out["first_paint_s"] = time.perf_counter() - START
            out["first_paint_at"] = time.time()  # the parent measures from before it started this process
            for _ in range(3000):
                if isinstance(app.screen, MainScreen):
                    break
                await pilot.pause(0.01)
            else:
                out["error"] = f"main screen never appeared ({app.load_error})"
                return
            await pilot.pause()
            out["main_screen_s"] = time.perf_counter() - START
            out["main_screen_at"] = time.time()
            await app.workers.wait_for_complete()
            for name, keys in (("pagedown", ["pagedown"]), ("end", ["end", "home"]), ("o", ["o"]),
                               ("cursor", ["down", "up"])):
                times = []
                for i in range(SAMPLES):
                    key = keys[i % len(keys)]
                    t = time.perf_counter()
                    await pilot.press(key)
                    await pilot.pause()
                    times.append(time.perf_counter() - t)
                out[f"key_{name}_s"] = _summary(times)

    asyncio.run(drive())
    return out


def _summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"p50": statistics.median(ordered), "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "max": ordered[-1]}


def main() -> int:
    mode, path, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
    if mode == "pickle":
        result = run_pickle(path)
    elif mode == "viz":
        result = run_viz(path)
    elif mode == "cold":
        result = run_cold(path, cache_dir)
    elif mode == "plain":
        result = run_cold(path, "", streaming=False)
    elif mode == "stream":
        result = run_cold(path, "", fast=False)
    elif mode == "warm":
        result = run_warm(path, cache_dir)
    elif mode == "tui":
        result = run_tui(path, cache_dir)
    elif mode == "tui_cold":  # the first open ever: an empty cache folder of its own
        import tempfile

        result = run_tui(path, tempfile.mkdtemp(dir=cache_dir or None))
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
