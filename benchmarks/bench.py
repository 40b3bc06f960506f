"""Benchmark memtui against ``pickle.load`` on snapshot files: ``bench.py FILE... [--json OUT]``.

The headline is what a user sees: whole processes, timed from before they start to their
exit, with their peak resident size (``wait4``): a script that calls ``pickle.load``,
the same for memtui's cold open, ``memtui info --no-cache``, and the explorer's first full
screen from a warm cache. Every whole-process figure is a ratio to the ``pickle.load``
script. The in-process figures below it (each in its own fresh process too, one at a
time, so peaks do not mix) are ratios to ``pickle.load`` timed inside its process.
``--cores N`` runs every process on the first N cores (``taskset``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD = HERE / "bench_child.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import bytecode  # noqa: E402  (benchmarks/bytecode.py)
import terminal  # noqa: E402  (benchmarks/terminal.py)
from entry import install_note, memtui_argv  # noqa: E402  (benchmarks/entry.py)

LARGE = 5_000_000  # events from which the large-file targets apply

# (row label, key in the results, kind, target, what the target is, ratio base)
# target: ("ratio", limit) to the base, ("abs", seconds or bytes), or a dict of those by size
# ("small"/"large"/"huge": up to 1.5M events, up to 20M, more).
PROCESS_ROWS = [
    ("pickle.load script", "proc_pickle.time_s", "time", None, "baseline", "proc_pickle"),
    ("pickle.load script peak RSS", "proc_pickle.peak_rss", "mem", None, "baseline", "proc_pickle"),
    ("cold open, model ready", "proc_cold.time_s", "time",
     {"large": ("ratio", 0.15), "huge": ("abs", 40.0)}, "<= 0.15x (40M: <= 40 s)", "proc_pickle"),
    ("cold open peak RSS", "proc_cold.peak_rss", "mem",
     {"large": ("ratio", 0.15), "huge": ("abs", 3e9)}, "<= 0.15x (40M: <= 3 GB)", "proc_pickle"),
    ("memtui info --no-cache", "proc_info.time_s", "time", None, "what a user runs", "proc_pickle"),
    ("memtui info --no-cache peak RSS", "proc_info.peak_rss", "mem", None, "", "proc_pickle"),
    ("first memtui info (prints, then writes the cache)", "proc_info_first.time_s", "time",
     {"large": ("ratio", 0.10)}, "<= 0.10x at 10M", "proc_pickle"),
    ("first memtui info peak RSS", "proc_info_first.peak_rss", "mem", None, "", "proc_pickle"),
    ("explorer in a terminal (tmux), first full screen, warm cache", "term_warm.screen_s", "time",
     {"large": ("abs", 1.0)}, "<= 1 s at 10M", "proc_pickle"),
    ("the same, cold (first open ever)", "term_cold.screen_s", "time", {"large": ("ratio", 0.15)},
     "<= 0.15x at 10M", "proc_pickle"),
    ("the same, after memtui info wrote the model (the curves not kept yet)", "term_after_info.screen_s", "time",
     {"large": ("abs", 1.0)}, "<= 1 s at 10M (the model is cached)", "proc_pickle"),
    ("keys in the terminal p50 / p95 (after info)", "term_after_info.keys", "key", ("abs", 0.050), "p95 <= 50 ms",
     "proc_pickle"),
    ("keys in the terminal p50 / p95 (warm)", "term_warm.keys", "key", ("abs", 0.050), "p95 <= 50 ms",
     "proc_pickle"),
    ("explorer under Pilot, first full screen (warm cache)", "tui.screen_wall_s", "time", None,
     "Pilot waits for the app to be idle", "proc_pickle"),
    ("the same, cold", "tui_cold.screen_wall_s", "time", None, "", "proc_pickle"),
]
ROWS = [
    ("pickle.load", "pickle.time_s", "time", None, "baseline", "pickle"),
    ("pickle.load peak RSS", "pickle.peak_rss", "mem", None, "baseline", "pickle"),
    ("_memory_viz stats", "viz.time_s", "time", None, "", "pickle"),
    ("_memory_viz stats peak RSS", "viz.peak_rss", "mem", None, "", "pickle"),
    ("cold open, model ready", "cold.time_s", "time", None, "", "pickle"),
    ("cold open peak RSS", "cold.peak_rss", "mem", None, "", "pickle"),
    ("helper process peak RSS", "cold.helper_peak_rss", "mem", None, "streaming decoder only", "pickle"),
    ("resident after build", "cold.resident", "mem", None, "whole process", "pickle"),
    ("model in memory", "cold.model_bytes", "mem", {"small": ("ratio", 0.25), "large": ("ratio", 0.1)},
     "<= 0.1x (1M: 0.25x)", "pickle"),
    ("cache write (background)", "cold.cache_write_s", "time", None, "after model ready", "pickle"),
    ("streaming decoder open (fallback)", "stream.time_s", "time", None, "no compiled scanner", "pickle"),
    ("streaming decoder peak RSS (fallback)", "stream.peak_rss", "mem", None, "no compiled scanner", "pickle"),
    ("plain path open (reference)", "plain.time_s", "time", None, "fallback", "pickle"),
    ("plain path peak RSS (reference)", "plain.peak_rss", "mem", None, "fallback", "pickle"),
    ("warm open (cache)", "warm.time_s", "time", {"small": ("abs", 0.3), "large": ("abs", 1.0)},
     "<= 0.3 s at 1M, <= 1 s at 10M", "pickle"),
    ("resident after warm open", "warm.resident", "mem", None, "mapped, whole process", "pickle"),
    ("replay index build", "warm.replay_index_s", "time", None, "", "pickle"),
    ("replay index memory", "warm.replay_index_bytes", "mem", None, "checkpoints", "pickle"),
    ("state at random event p50", "warm.state_at_s.p50", "time", None, "", "pickle"),
    ("state at random event max", "warm.state_at_s.max", "time", ("abs", 0.020), "<= 20 ms", "pickle"),
    ("address_n search max", "warm.address_n_search_s.max", "time", ("abs", 0.010), "<= 10 ms", "pickle"),
    ("filter size>1MiB action:alloc", "warm.column_filter_s", "time", ("abs", 0.5), "<= 0.5 s", "pickle"),
    ("frame filter", "warm.frame_filter_s", "time", None, "per interned stack", "pickle"),
    ("export 10% of events", "warm.export_10pct_s", "time", None, "msgpack", "pickle"),
    ("TUI first paint", "tui.first_paint_s", "time", ("abs", 0.5), "<= 0.5 s after start", "pickle"),
    ("TUI main screen (warm cache)", "tui.main_screen_s", "time", None, "after the interpreter started", "pickle"),
    ("TUI PageDown p50 / p95", "tui.key_pagedown_s", "key", ("abs", 0.050), "p95 <= 50 ms", "pickle"),
    ("TUI End/Home p50 / p95", "tui.key_end_s", "key", ("abs", 0.050), "p95 <= 50 ms", "pickle"),
    ("TUI o (next OOM) p50 / p95", "tui.key_o_s", "key", ("abs", 0.050), "p95 <= 50 ms", "pickle"),
    ("TUI cursor moves p50 / p95", "tui.key_cursor_s", "key", ("abs", 0.050), "p95 <= 50 ms", "pickle"),
]

PICKLE_SCRIPT = "import pickle, sys\nwith open(sys.argv[1], 'rb') as fh:\n    pickle.load(fh)\n"
OPEN_SCRIPT = "import sys\nfrom memtui.open import open_snapshot\nopen_snapshot(sys.argv[1], cache=None)\n"


class Runner:
    """Starts the measured processes: on the first ``cores`` cores, under an optional
    address-space cap, each on its own, timed from before it starts."""

    def __init__(self, cores: int | None, timeout: float) -> None:
        self.cores = cores
        self.timeout = timeout
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

    def command(self, argv: list[str], limit_gb: float | None) -> list[str]:
        if limit_gb:
            # pickle.load of a huge file would take the whole machine: cap it, report how it fails.
            argv = ["prlimit", f"--as={int(limit_gb * (1 << 30))}", "--"] + argv
        if self.cores:
            argv = ["taskset", "-c", f"0-{self.cores - 1}"] + argv
        return argv

    def process(self, argv: list[str], limit_gb: float | None = None) -> dict:
        """Wall time and peak RSS of a whole process (the largest in its tree, from wait4)."""
        start = time.monotonic()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(self.command(argv, limit_gb), stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
                                    env=self.env)
            deadline = start + self.timeout
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                    return {"error": f"timed out after {self.timeout:.0f} s"}
                time.sleep(0.005)
            elapsed = time.monotonic() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode:
                err.seek(0)
                tail = (err.read().decode(errors="replace").strip().splitlines() or ["?"])[-1]
                return {"error": f"exit {proc.returncode} after {elapsed:.0f} s: {tail[:160]}"}
        return {"time_s": elapsed, "peak_rss": usage.ru_maxrss * 1024}

    def child(self, mode: str, path: str, cache_dir: str, limit_gb: float | None) -> dict:
        """One in-process measurement by bench_child.py (its last stdout line is JSON)."""
        spawned = time.time()
        try:
            proc = subprocess.run(self.command([sys.executable, str(CHILD), mode, path, cache_dir], limit_gb),
                                  capture_output=True, text=True, timeout=self.timeout, env=self.env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {self.timeout:.0f} s"}
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return {"error": f"exit {proc.returncode} after {time.time() - spawned:.0f} s: {tail[:160]}"}
        out = json.loads(lines[-1])
        if "main_screen_at" in out:
            out["screen_wall_s"] = out["main_screen_at"] - spawned
        return out


TERMINAL_MODES = ("term_cold", "term_warm", "term_after_info")


def terminal_runs(path: str, runner: Runner, cache_dir: str, skip: bool, repeat: int, note) -> dict:
    """The explorer's first full screen in tmux, cold (a new cache folder), warm (the folder
    the cold run just wrote) and after ``memtui info`` (a new folder that info wrote: the
    model kept, the explorer's curves not yet), taken in turn; medians, and the keys."""
    if skip:
        return {mode: {"note": "skipped"} for mode in TERMINAL_MODES}
    if not terminal.available():
        return {mode: {"note": "tmux not installed"} for mode in TERMINAL_MODES}
    runs: dict[str, list[dict]] = {mode: [] for mode in TERMINAL_MODES}
    for k in range(repeat):
        folder = tempfile.mkdtemp(dir=cache_dir)
        for mode in TERMINAL_MODES:
            note(f"{mode} ({k + 1}/{repeat})")
            if mode == "term_after_info":
                folder = tempfile.mkdtemp(dir=cache_dir)
                runner.process(memtui_argv("info", "--cache-dir", folder, path))
            argv = runner.command(memtui_argv("--cache-dir", folder, path), None)
            runs[mode].append(terminal.first_screen(argv, runner.env))
    out = {}
    for mode, measured in runs.items():
        good = [m for m in measured if "error" not in m]
        if not good:
            out[mode] = measured[0]
            continue
        out[mode] = {"screen_s": statistics.median(m["screen_s"] for m in good), "runs": len(good),
                     "screens_s": sorted(m["screen_s"] for m in good),
                     "keys": {"p50": statistics.median(m["keys_p50_s"] for m in good),
                              "p95": max(m["keys_p95_s"] for m in good)}}
    return out


def median_run(measured: list[dict]) -> dict:
    """The median time and the median peak of the runs that worked (with how many there were)."""
    good = [m for m in measured if "error" in m] if all("error" in m for m in measured) else \
        [m for m in measured if "error" not in m]
    if "error" in good[0]:
        return good[0]
    times = sorted(m["time_s"] for m in good)
    peaks = sorted(m["peak_rss"] for m in good)
    return {"time_s": statistics.median(times), "peak_rss": int(statistics.median(peaks)), "runs": len(good),
            "times_s": times}


def bench_file(path: str, runner: Runner, limit_gb: float | None, skip_tui: bool, skip: set[str],
               repeat: int = 1) -> dict:
    results: dict = {"file": path, "size": os.path.getsize(path)}
    cache_dir = tempfile.mkdtemp(prefix="memtui-bench-cache-")
    python = sys.executable

    def note(mode: str) -> None:
        print(f"  {Path(path).name}: {mode} ...", file=sys.stderr, flush=True)

    try:
        processes = [(mode, argv, limit) for mode, argv, limit in (
            ("proc_pickle", [python, "-c", PICKLE_SCRIPT, path], limit_gb),
            ("proc_cold", [python, "-c", OPEN_SCRIPT, path], None),
            ("proc_info", memtui_argv("info", "--no-cache", path), None),
            # A first open: a cache folder of its own each run, so every run writes the cache.
            ("proc_info_first", lambda: memtui_argv("info", "--cache-dir", tempfile.mkdtemp(dir=cache_dir), path),
             None),
        ) if mode not in skip]
        for mode in ("proc_pickle", "proc_cold", "proc_info", "proc_info_first"):
            if mode in skip:
                results[mode] = {"note": "skipped"}
        # The machine is shared: each whole-process figure is the median of ``repeat`` runs,
        # the three taken in turn so a busy moment weighs on all of them alike.
        runs: dict[str, list[dict]] = {mode: [] for mode, _, _ in processes}
        for k in range(repeat):
            for mode, argv, limit in processes:
                note(f"{mode} ({k + 1}/{repeat})")
                runs[mode].append(runner.process(argv() if callable(argv) else argv, limit))
        for mode, measured in runs.items():
            results[mode] = median_run(measured)
        results.update(terminal_runs(path, runner, cache_dir, skip_tui or "term" in skip, repeat, note))
        steps = [("pickle", limit_gb)]
        if importlib.util.find_spec("torch") is not None:
            steps.append(("viz", limit_gb))
        else:
            results["viz"] = {"note": "torch not installed"}
        steps += [("cold", None), ("stream", limit_gb), ("plain", limit_gb), ("warm", None)]
        if skip_tui:
            results["tui"] = results["tui_cold"] = {"note": "skipped"}
        elif importlib.util.find_spec("memtui.tui.app") is None:
            results["tui"] = {"note": "memtui.tui not available"}
        else:
            steps += [("tui", None), ("tui_cold", None)]
        for mode, limit in steps:
            if mode in skip:
                results[mode] = {"note": "skipped"}
                continue
            note(mode)
            results[mode] = runner.child(mode, path, cache_dir, limit)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return results


def lookup(results: dict, key: str):
    value: object = results
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def size_class(results: dict) -> str:
    events = lookup(results, "cold.events") or lookup(results, "proc_cold.events") or 0
    if not events:  # no cold figure: judge by the file's size (about 87 bytes an event)
        events = results.get("size", 0) // 87
    return "small" if events <= 1_500_000 else "large" if events <= 20_000_000 else "huge"


def format_row(results: dict, label: str, key: str, kind: str, target, note: str, base: str) -> list[str]:
    value = lookup(results, key)
    section = results.get(key.split(".")[0], {})
    if value is None:
        reason = section.get("error") or section.get("note") or section.get("filter_note") or \
            section.get("export_note") or "not measured"
        return [label, "-", "-", note, reason]
    base_time = lookup(results, f"{base}.time_s")
    base_mem = lookup(results, f"{base}.peak_rss")
    if kind == "key":
        shown = f"{value['p50'] * 1e3:.1f} / {value['p95'] * 1e3:.1f} ms"
        ratio = "-"
        value = value["p95"]
    elif kind == "time":
        shown = f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s" if value < 10 else f"{value:.1f} s"
        ratio = (f"{value / base_time:.2f}x" if value / base_time >= 0.01 else "<0.01x") if base_time else "-"
    else:
        shown = f"{value / 1e6:,.0f} MB"
        ratio = f"{value / base_mem:.2f}x" if base_mem else "-"
    if isinstance(target, dict):
        target = target.get(size_class(results))
    if target is None:
        return [label, shown, ratio, note, ""]
    how, limit = target
    if how == "ratio":
        denominator = base_time if kind == "time" else base_mem
        if not denominator:
            return [label, shown, ratio, note, "no pickle.load figure to compare with"]
        number = value / denominator
    else:
        number = value
    return [label, shown, ratio, note, "met" if number <= limit else "NOT met"]


def derive(results: dict) -> dict:
    """Figures computed from others: the model's own memory, net of the interpreter."""
    cold = results.get("cold", {})
    if "resident" in cold and "baseline_rss" in cold:
        cold["model_bytes"] = cold["resident"] - cold["baseline_rss"]
    return results


def print_table(results: dict, machine: dict | None = None) -> None:
    events = lookup(results, "cold.events")
    title = f"{Path(results['file']).name}: {results['size'] / 1e6:,.1f} MB"
    if events:
        title += f", {events:,} events"
    print(f"\n### {title}\n")
    for heading, rows in (("Whole processes (as a user runs them)", PROCESS_ROWS), ("In-process figures", ROWS)):
        base = "the pickle.load script" if rows is PROCESS_ROWS else "pickle.load in its process"
        print(f"{heading}:\n")
        print(f"| figure | value | ratio to {base} | target | met? |")
        print("| --- | ---: | ---: | --- | --- |")
        for row in rows:
            print("| " + " | ".join(format_row(results, *row)) + " |")
        print()
    extra = []
    if lookup(results, "cold.path"):
        extra.append(f"cold open path: {results['cold']['path']}")
    if lookup(results, "cold.fallback"):
        extra.append(f"fallback: {results['cold']['fallback'][0]}")
    if lookup(results, "warm.frame_filter"):
        extra.append(f"frame filter: `{results['warm']['frame_filter']}`")
    if machine:
        extra.append(f"{machine.get('cores') or machine.get('cpus')} cores")
        if machine.get("install"):
            extra.append(machine["install"])
    runs = lookup(results, "proc_cold.runs")
    if runs:
        extra.append(f"whole-process figures: median of {runs} alternating runs")
    if extra:
        print("; ".join(extra))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--json", type=Path, default=Path("bench.json"), help="where to write all figures")
    parser.add_argument("--limit-gb", type=float, default=None,
                        help="address-space cap for the pickle.load, streaming and plain runs (for huge files)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed for each measurement")
    parser.add_argument("--cores", type=int, default=None, help="run every process on the first N cores")
    parser.add_argument("--skip-tui", action="store_true")
    parser.add_argument("--skip", default="", help="comma-separated measurements to leave out (e.g. plain,stream)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each whole-process figure (the median is shown)")
    parser.add_argument("--from-json", action="store_true", help="print the tables of FILE (a JSON written before)")
    args = parser.parse_args(argv)
    if args.from_json:
        for path in args.files:
            saved = json.loads(Path(path).read_text())
            for results in saved["files"]:
                print_table(derive(results), saved.get("machine"))
        return 0
    bytecode.compile_checkout(ROOT)
    bytecode.say_if_missing()
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "cores": args.cores,
               "platform": platform.platform(), "install": install_note()}
    everything = {"machine": machine, "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]), "files": []}
    runner = Runner(args.cores, args.timeout)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    for path in args.files:
        results = derive(bench_file(path, runner, args.limit_gb, args.skip_tui, skip, max(1, args.repeat)))
        everything["files"].append(results)
        print_table(results, machine)
        args.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
