"""Benchmark memtui against ``pickle.load`` on snapshot files: ``bench.py FILE... [--json OUT]``.

Each figure is measured in its own fresh process, one at a time (so peaks do not mix and
two heavy runs never share the machine), and reported with its ratio to ``pickle.load``
of the same file in the same run: times to its time, memory to its peak RSS.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = HERE / "bench_child.py"
sys.path.insert(0, str(HERE.parent))

# (row label, key in the results, kind, target as a ratio or seconds, what the target is)
ROWS = [
    ("pickle.load", "pickle.time_s", "time", None, "baseline"),
    ("pickle.load peak RSS", "pickle.peak_rss", "mem", None, "baseline"),
    ("_memory_viz stats", "viz.time_s", "time", None, ""),
    ("_memory_viz stats peak RSS", "viz.peak_rss", "mem", None, ""),
    ("cold open, model ready", "cold.time_s", "time", ("ratio", 1.2), "<= 1.2x"),
    ("cold open peak RSS", "cold.peak_rss", "mem", ("ratio", 0.3), "<= 0.3x (1M: 0.5x)"),
    ("helper process peak RSS", "cold.helper_peak_rss", "mem", None, "decompress, unframe, rewrite"),
    ("resident after build", "cold.resident", "mem", None, "whole process"),
    ("model in memory", "cold.model_bytes", "mem", ("ratio", 0.1), "<= 0.1x (1M: 0.25x)"),
    ("cache write (background)", "cold.cache_write_s", "time", None, "after model ready"),
    ("plain path open (reference)", "plain.time_s", "time", None, "fallback"),
    ("plain path peak RSS (reference)", "plain.peak_rss", "mem", None, "fallback"),
    ("warm open (cache)", "warm.time_s", "time", ("abs", None), "<= 0.3 s at 1M, <= 1 s at 10M"),
    ("resident after warm open", "warm.resident", "mem", None, "mapped, whole process"),
    ("replay index build", "warm.replay_index_s", "time", None, ""),
    ("replay index memory", "warm.replay_index_bytes", "mem", None, "checkpoints"),
    ("state at random event p50", "warm.state_at_s.p50", "time", None, ""),
    ("state at random event max", "warm.state_at_s.max", "time", ("abs", 0.020), "<= 20 ms"),
    ("address_n search max", "warm.address_n_search_s.max", "time", ("abs", 0.010), "<= 10 ms"),
    ("filter size>1MiB action:alloc", "warm.column_filter_s", "time", ("abs", 0.5), "<= 0.5 s"),
    ("frame filter", "warm.frame_filter_s", "time", None, "per interned stack"),
    ("export 10% of events", "warm.export_10pct_s", "time", None, "msgpack"),
    ("TUI first paint", "tui.first_paint_s", "time", ("abs", 0.5), "<= 0.5 s after start"),
    ("TUI main screen (warm cache)", "tui.main_screen_s", "time", None, ""),
    ("TUI PageDown p50 / p95", "tui.key_pagedown_s", "key", ("abs", 0.050), "p95 <= 50 ms"),
    ("TUI End/Home p50 / p95", "tui.key_end_s", "key", ("abs", 0.050), "p95 <= 50 ms"),
    ("TUI o (next OOM) p50 / p95", "tui.key_o_s", "key", ("abs", 0.050), "p95 <= 50 ms"),
    ("TUI cursor moves p50 / p95", "tui.key_cursor_s", "key", ("abs", 0.050), "p95 <= 50 ms"),
]
_SMALL_FILE_TARGETS = {"cold.peak_rss": 0.5, "cold.model_bytes": 0.25}


def run_child(mode: str, path: str, cache_dir: str, limit_gb: float | None, timeout: float) -> dict:
    cmd = [sys.executable, str(CHILD), mode, path, cache_dir]
    if limit_gb:
        # The plain pickle.load of a huge file would take the whole machine: cap it, and
        # report how it fails instead.
        limit = int(limit_gb * (1 << 30))
        cmd = ["prlimit", f"--as={limit}", "--"] + cmd
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {proc.returncode} after {time.monotonic() - start:.0f} s: {tail[:160]}"}
    return json.loads(lines[-1])


def bench_file(path: str, limit_gb: float | None, timeout: float, skip_tui: bool) -> dict:
    results: dict = {"file": path, "size": os.path.getsize(path)}
    cache_dir = tempfile.mkdtemp(prefix="memtui-bench-cache-")
    try:
        steps = [("pickle", limit_gb)]
        if importlib.util.find_spec("torch") is not None:
            steps.append(("viz", limit_gb))
        else:
            results["viz"] = {"note": "torch not installed"}
        steps += [("cold", None), ("plain", limit_gb), ("warm", None)]
        if skip_tui:
            results["tui"] = {"note": "skipped"}
        elif importlib.util.find_spec("memtui.tui.app") is None:
            results["tui"] = {"note": "memtui.tui not available"}
        else:
            steps.append(("tui", None))
        for mode, limit in steps:
            print(f"  {Path(path).name}: {mode} ...", file=sys.stderr, flush=True)
            results[mode] = run_child(mode, path, cache_dir, limit, timeout)
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


def format_row(results: dict, label: str, key: str, kind: str, target, note: str) -> list[str]:
    value = lookup(results, key)
    section = results.get(key.split(".")[0], {})
    if value is None:
        reason = section.get("error") or section.get("note") or section.get("filter_note") or \
            section.get("export_note") or "not measured"
        return [label, "-", "-", note, reason]
    base_time = lookup(results, "pickle.time_s")
    base_mem = lookup(results, "pickle.peak_rss")
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
    verdict = ""
    if target is not None:
        how, limit = target
        if how == "abs" and limit is None:  # warm open: 0.3 s up to ~1M events, 1 s beyond
            events = lookup(results, "cold.events") or 0
            limit = 0.3 if events <= 1_500_000 else 1.0
        if how == "ratio" and (base_time if kind == "time" else base_mem):
            if key in _SMALL_FILE_TARGETS and (lookup(results, "cold.events") or 0) <= 1_500_000:
                limit = _SMALL_FILE_TARGETS[key]
            number = value / (base_time if kind == "time" else base_mem)
        elif how == "ratio":
            return [label, shown, ratio, note, "no pickle.load figure to compare with"]
        else:
            number = value
        verdict = "met" if number <= limit else "NOT met"
    return [label, shown, ratio, note, verdict]


def derive(results: dict) -> dict:
    """Figures computed from others: the model's own memory, net of the interpreter."""
    cold = results.get("cold", {})
    if "resident" in cold and "baseline_rss" in cold:
        cold["model_bytes"] = cold["resident"] - cold["baseline_rss"]
    return results


def print_table(results: dict) -> None:
    events = lookup(results, "cold.events")
    title = f"{Path(results['file']).name}: {results['size'] / 1e6:,.1f} MB"
    if events:
        title += f", {events:,} events"
    print(f"\n### {title}\n")
    print("| figure | value | ratio to pickle.load | target | met? |")
    print("| --- | ---: | ---: | --- | --- |")
    for row in ROWS:
        cells = format_row(results, *row)
        print("| " + " | ".join(cells) + " |")
    extra = []
    if lookup(results, "cold.path"):
        extra.append(f"cold open path: {results['cold']['path']}")
    if lookup(results, "warm.frame_filter"):
        extra.append(f"frame filter: `{results['warm']['frame_filter']}`")
    if extra:
        print("\n" + "; ".join(extra))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--json", type=Path, default=Path("bench.json"), help="where to write all figures")
    parser.add_argument("--limit-gb", type=float, default=None,
                        help="address-space cap for the pickle.load and plain-path runs (for huge files)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed for each measurement")
    parser.add_argument("--skip-tui", action="store_true")
    parser.add_argument("--from-json", action="store_true", help="print the tables of FILE (a JSON written before)")
    args = parser.parse_args(argv)
    if args.from_json:
        for path in args.files:
            for results in json.loads(Path(path).read_text())["files"]:
                print_table(derive(results))
        return 0
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    everything = {"machine": machine, "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]), "files": []}
    for path in args.files:
        results = derive(bench_file(path, args.limit_gb, args.timeout, args.skip_tui))
        everything["files"].append(results)
        print_table(results)
        args.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
