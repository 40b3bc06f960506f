"""Comparing many ranks: ``ranks_bench.py [--ranks 256] [--dir DIR] [--workers 1,2] [--cluster 2]``.

Makes a job's worth of rank files from one real snapshot (by default the 31k-event
``leak_loss_history`` in ``../shared/snapshots``): each rank is the real trace moved to
its own address range and starting a few events later (as ring buffers that wrapped at
different moments do), written with protocol 4 as torch writes it; one rank holds an
extra 1 GiB from a call site of its own. Then it times ``memtui ranks DIR --json``, each
run a fresh process as a user would start it, with 1 and 2 local workers and with a
``LocalCluster``: cold (an empty summary cache) and warm (the same cache again), and
checks that every run flags the different rank and only it.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memtui.load.read import read_snapshot  # noqa: E402

DEFAULT_SOURCE = ROOT.parent / "shared" / "snapshots" / "leak_loss_history.pickle"
RANK_STRIDE = 1 << 36  # each rank's addresses; the source spans far less
EXTRA_BYTES = 1 << 30
EXTRA_FRAME = {"filename": "/job/train.py", "line": 404, "name": "keep_a_copy_on_this_rank"}
MANIFEST = "bench-manifest.json"


def make_rank_set(folder: Path, source: Path, ranks: int, odd: int) -> list[Path]:
    """The rank files, made again only when the folder holds another set."""
    wanted = {"source": str(source), "source_mtime": source.stat().st_mtime_ns, "ranks": ranks, "odd": odd,
              "layout": 2}
    manifest = folder / MANIFEST
    files = [folder / f"job.rank{r}.pickle" for r in range(ranks)]
    if manifest.exists() and json.loads(manifest.read_text()) == wanted and all(f.exists() for f in files):
        return files
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    raw = read_snapshot(source)
    traces = raw["device_traces"]
    main = max(range(len(traces)), key=lambda d: len(traces[d]))
    full = traces[main]
    shifted = 0
    for rank, path in enumerate(files):
        _shift(raw, rank * RANK_STRIDE - shifted)
        shifted = rank * RANK_STRIDE
        # Each rank's ring buffer wrapped at a slightly different event (long traces only: a
        # short one would lose a real share of its memory and make every rank different).
        trace = full[rank % 97:] if len(full) > 100 * 97 else full
        if rank == odd:  # a segment of its own, and an allocation in it that is never freed
            first = trace[0]
            addr = 0x7E0000000000 + shifted
            segment = {**first, "action": "segment_alloc", "addr": addr, "size": EXTRA_BYTES, "frames": [EXTRA_FRAME]}
            extra = {**first, "action": "alloc", "addr": addr, "size": EXTRA_BYTES, "frames": [EXTRA_FRAME]}
            trace = [first, segment, extra, *trace[1:]]
        traces[main] = trace
        with open(path, "wb") as fh:
            pickle.dump(raw, fh, protocol=4)
    traces[main] = full
    manifest.write_text(json.dumps(wanted))
    return files


def _shift(raw: dict, delta: int) -> None:
    if not delta:
        return
    for seg in raw["segments"]:
        seg["address"] += delta
        for block in seg.get("blocks", []):
            block["address"] += delta
    for trace in raw["device_traces"]:
        for e in trace:
            if e.get("addr"):
                e["addr"] += delta


def run_ranks(folder: Path, cache: Path, options: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of memtui and all its worker processes, the JSON result).

    The CPU time does not depend on what else the machine is doing: on a shared machine it
    tells what the wall time would be on an idle one."""
    command = [sys.executable, "-m", "memtui", "ranks", str(folder), "--json", "--cache-dir", str(cache), *options]
    before = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return seconds, _children_cpu() - before, json.loads(done.stdout)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def folder_bytes(folder: Path) -> tuple[int, int]:
    sizes = [p.stat().st_size for p in folder.rglob("*.msgpack")]
    return len(sizes), sum(sizes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/memtui-ranks-bench"),
                        help="where the rank files and the caches go (kept for the next run)")
    parser.add_argument("--workers", default="1,2", help="local worker counts to time (comma-separated)")
    parser.add_argument("--cluster", default="2", help="LocalCluster worker counts to time (comma-separated, or '')")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.source.exists():
        raise SystemExit(f"source snapshot not found: {args.source}")
    odd = args.ranks * 2 // 3
    start = time.perf_counter()
    files = make_rank_set(args.dir / "ranks", args.source, args.ranks, odd)
    total = sum(f.stat().st_size for f in files)
    print(f"{len(files)} rank files, {total / 1e6:,.0f} MB ({time.perf_counter() - start:.1f} s to prepare); "
          f"rank {odd} is the different one; {os.cpu_count()} CPUs")

    configs = [(f"{n} local worker{'s' if n > 1 else ''}", ["--workers", str(n)])
               for n in _counts(args.workers)]
    configs += [(f"LocalCluster, {n} worker processes", ["--cluster", f"local:{n}"]) for n in _counts(args.cluster)]
    rows = []
    for name, options in configs:
        cache = args.dir / "cache" / "-".join(options).replace(":", "")
        shutil.rmtree(cache, ignore_errors=True)
        load = os.getloadavg()[0]
        cold, cold_cpu, result = run_ranks(args.dir / "ranks", cache, options)
        warm, warm_cpu, again = run_ranks(args.dir / "ranks", cache, options)
        for r in (result, again):
            flagged = [o["rank"] for o in r["outliers"]]
            if flagged != [odd] or r["failed"]:
                raise SystemExit(f"{name}: flagged {flagged}, failed {r['failed']}; expected rank {odd} only")
        entries, cached = folder_bytes(cache)
        rows.append({"config": name, "cold_s": round(cold, 2), "cold_cpu_s": round(cold_cpu, 2),
                     "warm_s": round(warm, 2), "warm_cpu_s": round(warm_cpu, 2),
                     "files_per_s_cold": round(len(files) / cold, 1), "load_before": round(load, 2),
                     "summaries": entries, "summary_bytes_mean": round(cached / max(entries, 1))})
        print(f"  {name:<36} cold {cold:7.2f} s ({cold_cpu:6.1f} CPU s)   warm {warm:6.2f} s ({warm_cpu:5.2f} CPU s)"
              f"   load before {load:.1f}")

    print()
    print("| how | cold: wall | cold: CPU | warm: wall | warm: CPU | files/s cold |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['config']} | {r['cold_s']:.1f} s | {r['cold_cpu_s']:.1f} s | {r['warm_s']:.2f} s "
              f"| {r['warm_cpu_s']:.2f} s | {r['files_per_s_cold']:.1f} |")
    mean = rows[0]["summary_bytes_mean"] if rows else 0
    print(f"\nsummaries: {mean:,} bytes each on average (msgpack), against {total / len(files) / 1e6:,.1f} MB "
          "per rank file")
    if args.json:
        args.json.write_text(json.dumps({"ranks": len(files), "bytes": total, "cpus": os.cpu_count(),
                                         "source": str(args.source), "runs": rows}, indent=2))
    return 0


def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
