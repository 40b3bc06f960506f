"""Run every held-out program, each in a process of its own, then re-run the ones that ran out
of memory with expandable_segments:True, and derive the file-based figures and the split
(derive.py).

    python sample_snapshots/heldout/run_all.py --out DIR [--jobs 8] [--programs DIR --split LABEL] [NAME ...]

``--programs`` runs another folder's programs (sample_snapshots/heldout2/programs) and
``--split`` then labels every file of that set alike instead of halving it.

Needs PyTorch, transformers, timm and a CUDA GPU. Leaves DIR/NAME.pickle, DIR/NAME.truth.json
and DIR/logs/NAME.log.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import derive  # noqa: E402 - beside this file

PROGRAMS = os.path.join(HERE, "programs")


def discover(programs: str = PROGRAMS) -> dict[str, tuple[str, dict]]:
    """name -> (program file, environment it starts with), from each file's ``--list``."""
    found = {}
    files = sorted(f for f in glob.glob(os.path.join(programs, "*.py")) if not os.path.basename(f).startswith("_"))
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda f: subprocess.run([sys.executable, f, "--list"], capture_output=True,
                                                      text=True), files))
    for f, out in zip(files, outs):
        if out.returncode:
            print(f"cannot list {f}:\n{out.stderr[-2000:]}", flush=True)
            continue
        for line in out.stdout.splitlines():
            name, env = line.split("\t")
            found[name] = (f, json.loads(env))
    return found


def run(name, file, env, out, rerun=False, timeout=150) -> int:
    full = {**os.environ, **env, "HELDOUT_OUT": out, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
            "TORCHINDUCTOR_COMPILE_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if rerun:
        full.update(HELDOUT_RERUN="1", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    log = os.path.join(out, "logs", name + (".rerun" if rerun else "") + ".log")
    t0 = time.time()
    with open(log, "w") as f:
        try:
            code = subprocess.run([sys.executable, file, name], env=full, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = -9
    print(f"{name}{' (rerun)' if rerun else ''}: exit {code} in {time.time() - t0:.0f}s", flush=True)
    return code


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--deadline", type=float, default=1e9, help="seconds after which no program starts")
    p.add_argument("--programs", default=PROGRAMS, help="folder of program files")
    p.add_argument("--split", help="the split of every file of this set (default: halves, build and heldout)")
    p.add_argument("names", nargs="*")
    a = p.parse_args(argv)
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    start = time.time()
    found = discover(a.programs)
    names = a.names or list(found)
    # Slow starters first (compilation, C++ stacks), so the tail of the run is short.
    names.sort(key=lambda n: (not n.startswith("compile"), not n.endswith("_all")))

    def first(name):
        if time.time() - start > a.deadline:
            print(f"{name}: not started (deadline)", flush=True)
            return
        run(name, *found[name], a.out)
        truth = os.path.join(a.out, name + ".truth.json")
        if os.path.exists(truth):
            with open(truth) as f:
                if json.load(f).get("oom") and time.time() - start < a.deadline + 60:
                    run(name, *found[name], a.out, rerun=True)

    with ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(first, names))
    derive.main(a.out, a.split)                 # has_trace, OOM figures by pool, the split
    missing = [n for n in names if not os.path.exists(os.path.join(a.out, n + ".truth.json"))]
    print(f"{len(names) - len(missing)} of {len(names)} programs left a truth file; missing: {missing}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
