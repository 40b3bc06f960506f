"""How opening scales with cores: ``scaling.py FILE [--cores 1,2,4,8,16] [--repeat 3] [--what ...]``.

Each figure is a whole process run on the first N cores (``taskset``), timed from before it
starts, with its peak RSS; the median of ``--repeat`` runs, the core counts and the
measures taken in turn. The measures (``--what``, comma-separated):

- ``open``: a script calling ``open_snapshot(path, cache=None)`` (the model ready);
- ``info``: ``memtui info --no-cache FILE`` as a user runs it;
- ``first``: the first ``memtui info FILE``, which also writes the model cache (a new, empty
  cache folder each run; the process ends once the cache is written);
- ``warm``: ``memtui info FILE`` with that cache already written.

A ``pickle.load`` script of the same file is the baseline, and a digest of the model (every
column and table) shows that every core count builds the same one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bytecode  # benchmarks/bytecode.py
from entry import install_note, memtui_argv  # benchmarks/entry.py

ROOT = Path(__file__).resolve().parent.parent

PICKLE = "import pickle, sys\nwith open(sys.argv[1], 'rb') as fh:\n    pickle.load(fh)\n"
OPEN = """
import hashlib, sys
import numpy as np
from memtui.open import open_snapshot
s = open_snapshot(sys.argv[1], cache=None)
if sys.argv[2] == "digest":
    h = hashlib.sha256()
    for d in s.devices:
        for part in (d.trace, d.lives, d.segment_lives):
            for name, value in sorted(vars(part).items()):
                if isinstance(value, np.ndarray):
                    h.update(name.encode() + str(value.dtype).encode() + value.tobytes())
    for arr in (s.stacks.flat, s.stacks.offsets, s.frames.filename, s.frames.line, s.frames.name):
        h.update(arr.tobytes())
    h.update("\\0".join(s.strings.values).encode("utf-8", "surrogatepass") + "\\0".join(s.actions.names).encode())
    print(h.hexdigest())
"""


MEASURES = {
    "open": "cold open, model ready (open_snapshot, no cache)",
    "info": "memtui info --no-cache",
    "first": "the first memtui info (writes the cache; the process ends when it is written)",
    "warm": "memtui info, cache written before",
}


def info_argv(path: str, cache_dir: str) -> list[str]:
    return memtui_argv("info", "--cache-dir", cache_dir, path)


def run(argv: list[str], cores: int | None, env: dict) -> dict:
    if cores and shutil.which("taskset"):
        argv = ["taskset", "-c", f"0-{cores - 1}"] + argv
    elif cores:  # no taskset: the scanner is told how many cores to use instead
        env = dict(env, MEMTUI_SCAN_THREADS=str(cores))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    out = proc.stdout.read().decode().strip()
    err = proc.stderr.read().decode().strip()
    if os.waitstatus_to_exitcode(status):
        return {"error": (err.splitlines() or ["?"])[-1][:200]}
    return {"time_s": elapsed, "peak_rss": usage.ru_maxrss * 1024, "out": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--cores", default="1,2,4,8,16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pickle", action="store_true", help="leave out the pickle.load baseline")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--what", default="open,info,first,warm", help="the measures, comma-separated")
    args = parser.parse_args()
    measures = [m for m in args.what.split(",") if m]
    unknown = set(measures) - set(MEASURES)
    if unknown:
        parser.error(f"unknown measure(s): {', '.join(sorted(unknown))}; known: {', '.join(MEASURES)}")
    bytecode.compile_checkout(ROOT)
    bytecode.say_if_missing()
    available = len(os.sched_getaffinity(0))
    counts = [c for c in (int(x) for x in args.cores.split(",")) if c <= available]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    results: dict = {"file": args.file, "size": os.path.getsize(args.file), "cpus": available, "cores": {},
                     "install": install_note()}
    if not args.no_pickle:
        print("pickle.load ...", file=sys.stderr, flush=True)
        results["pickle"] = run([sys.executable, "-c", PICKLE, args.file], None, env)
    digests = {}
    runs: dict[tuple[str, int], list[dict]] = {(m, c): [] for m in measures for c in counts}
    with tempfile.TemporaryDirectory(prefix="memtui-scaling-") as scratch:
        warm_dir = os.path.join(scratch, "warm")
        if "warm" in measures:
            run(info_argv(args.file, warm_dir), None, env)  # written once; every warm run reads it
        for k in range(args.repeat):
            for c in counts:
                for m in measures:
                    print(f"{m}, {c} cores ({k + 1}/{args.repeat}) ...", file=sys.stderr, flush=True)
                    first_dir = os.path.join(scratch, f"first-{m}-{c}-{k}")
                    argv = {"open": [sys.executable, "-c", OPEN, args.file, "-"],
                            "info": memtui_argv("info", "--no-cache", args.file),
                            "first": info_argv(args.file, first_dir),
                            "warm": info_argv(args.file, warm_dir)}[m]
                    runs[m, c].append(run(argv, c, env))
                    shutil.rmtree(first_dir, ignore_errors=True)
    for c in counts:  # the digests in runs of their own: hashing the model is not part of the open
        print(f"{c} cores: digest ...", file=sys.stderr, flush=True)
        r = run([sys.executable, "-c", OPEN, args.file, "digest"], c, env)
        if "out" in r:
            digests[c] = r["out"]
    base = results.get("pickle", {})
    print(f"\n{Path(args.file).name}: {results['size'] / 1e6:,.0f} MB, {available} cores here; {results['install']}\n")
    for m in measures:
        print(f"{MEASURES[m]}\n")
        print("| cores | time | peak RSS | ratio to pickle.load (time / peak) | speed-up from the fewest cores |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        first = None
        for c in counts:
            good = [r for r in runs[m, c] if "error" not in r]
            if not good:
                print(f"| {c} | {runs[m, c][0]['error']} | | | |")
                continue
            t = statistics.median(r["time_s"] for r in good)
            rss = statistics.median(r["peak_rss"] for r in good)
            first = first or t
            ratio = f"{t / base['time_s']:.3f}x / {rss / base['peak_rss']:.3f}x" if "time_s" in base else "-"
            print(f"| {c} | {t:.2f} s | {rss / 1e6:,.0f} MB | {ratio} | {first / t:.2f}x |")
            results["cores"].setdefault(m, {})[c] = {"time_s": t, "peak_rss": rss,
                                                     "times_s": sorted(r["time_s"] for r in good)}
        print()
    if "time_s" in base:
        print(f"pickle.load script: {base['time_s']:.1f} s, {base['peak_rss'] / 1e6:,.0f} MB")
    same = len(set(digests.values())) == 1 and len(digests) == len(counts)
    print(f"same model on every core count: {'yes' if same else 'NO'} ({len(set(digests.values()))} digests)")
    results["same_model"] = same
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
