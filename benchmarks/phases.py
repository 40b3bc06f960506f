"""Where the time of ``memtui info`` goes, step by step: ``phases.py FILE [--cores 1,16] [--repeat 3]``.

Each run is a fresh process on the first N cores (``taskset``) doing what ``memtui info
--no-cache FILE`` does, in the same order and through the same functions, with a clock read
between the steps; then the same for a warm ``memtui info`` (the model cache written
before). The steps of the parallel scan come from the scanner itself. Medians of
``--repeat`` runs, in seconds; "start" is from before the process is started until its first
line runs (the interpreter), "exit" from the answer until the process has ended.
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

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
begun = time.time()
marks = {"start": begun - float(sys.argv[3])}
def mark(name):
    global begun
    now = time.time()
    marks[name] = now - begun
    begun = now
path, cache_dir = sys.argv[1], sys.argv[2]
ahead_started = False
if cache_dir == "-":  # as the command line does before its imports (memtui/cli.py, _scan_ahead)
    from memtui.load import ahead
    from memtui.model.actions import BLOCK_ROLE_NAMES
    ahead_started = ahead.start(path, pair_by=BLOCK_ROLE_NAMES)
    mark("scan started before the imports" if ahead_started else "(no scan before the imports)")
import io, contextlib
from memtui.cli import find_command
command = find_command("info")
import memtui.commands._common, memtui.open
from memtui.services.info import render_text, summarize
mark("imports" + (" (the scan runs meanwhile)" if ahead_started else ""))
if cache_dir == "-":
    from memtui.load.shape import check_start
    from memtui.load.source import inspect_source
    from memtui.load.fast import scan_snapshot
    from memtui.open import _model_from_scan
    info = inspect_source(path)
    if info.compression is not None:  # an uncompressed file is checked only if the scanner hands it over
        check_start(info)
        mark("shape check")
    scanned = scan_snapshot(path)
    total = time.time() - begun
    steps = {"scan: in order (the first entries; on one core, all)": "prefix_s",
             "scan: workers (and the ranges merged meanwhile)": "workers_s", "scan: merge after the workers": "merge_s"}
    if ahead_started:  # the scanner's own steps ran partly under the imports: shown apart, in brackets
        marks["scan: what was left of it after the imports"] = total
        for name, step in steps.items():
            marks[f"({name})"] = scanned.parallel[step]
    else:
        for name, step in steps.items():
            marks[name] = scanned.parallel[step]
        rest = total - sum(scanned.parallel[s] for s in steps.values())
        marks["scan: the rest (the file's end, detached check)"] = rest
    if scanned.parallel["range_s"]:  # how evenly the ranges' threads shared the workers' time
        marks["(range threads: the quickest)"] = min(scanned.parallel["range_s"])
        marks["(range threads: the slowest)"] = max(scanned.parallel["range_s"])
    begun = time.time()
    snapshot = _model_from_scan(scanned, path)
    mark("model from the scan")
else:
    from memtui.cache.store import ModelCache
    snapshot = ModelCache(cache_dir).load(path)
    assert snapshot is not None, "no cache entry"
    mark("warm open (cache read and checked)")
summary = summarize(snapshot)
text = render_text(snapshot, summary)
mark("info figures and text")
print(json.dumps(marks), file=sys.stderr)
from memtui.process_end import end  # the command's own way of ending
end(0)
"""


def run_once(path: str, cores: int, cache_dir: str) -> dict:
    argv = [sys.executable, "-c", CHILD, path, cache_dir]
    if shutil.which("taskset"):
        argv = ["taskset", "-c", f"0-{cores - 1}"] + argv
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    started = time.time()
    proc = subprocess.run(argv + [repr(started)], capture_output=True, text=True, env=env, cwd=ROOT)
    ended = time.time()
    if proc.returncode:
        raise SystemExit(proc.stderr.strip().splitlines()[-1])
    marks = json.loads(proc.stderr.strip().splitlines()[-1])
    marks["exit"] = max(0.0, ended - started - sum(v for k, v in marks.items() if not k.startswith("(")))
    marks["whole process"] = ended - started
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    bytecode.compile_checkout(ROOT)
    bytecode.say_if_missing()
    available = len(os.sched_getaffinity(0))
    counts = [c for c in (int(x) for x in args.cores.split(",")) if c <= available]
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="memtui-phases-") as cache_dir:
        subprocess.run([sys.executable, "-m", "memtui", "info", "--cache-dir", cache_dir, args.file], cwd=ROOT,
                       capture_output=True, check=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                                      os.environ.get("PYTHONPATH")]))))
        for kind, where in (("cold", "-"), ("warm", cache_dir)):
            for c in counts:
                runs = [run_once(args.file, c, where) for _ in range(args.repeat)]
                steps = [k for k in runs[0] if all(k in r for r in runs)]
                results[f"{kind}, {c} cores"] = {k: statistics.median(r[k] for r in runs) for k in steps}
    print(f"{Path(args.file).name}: seconds, medians of {args.repeat} runs\n")
    for name, steps in results.items():
        print(f"{name}:")
        for step, value in steps.items():
            print(f"  {step:52} {value:6.3f}")
        print()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
