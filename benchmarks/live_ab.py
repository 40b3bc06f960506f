"""GPU figures for docs/watch.md, second series: serving's overhead as interleaved A/B blocks
with a confidence interval, and the latency from the GPU to the state the view draws.

Run on a CUDA machine from the repository root (memtui importable, torch and transformers
installed)::

    python benchmarks/live_ab.py costs      # _snapshot() against the segments alone, by history length
    python benchmarks/live_ab.py segments   # one segments read in a training job: read, packing, encoding
    python benchmarks/live_ab.py ab         # step time: recording / + serving / + a watcher, A/B blocks
    python benchmarks/live_ab.py latency    # GPU event -> the watcher's LiveState, training, idle, OOM

Each prints one JSON object on its last line. The workload is steady: one GPT-2 built from
its config, the same input every step, warmed up, ``torch.cuda.synchronize()`` at the end of
every step, so a step's time is the GPU's and the interpreter's, not a queue's. The A/B
blocks are short and many, their order shuffled every round (a fixed seed), so drift in
clocks and caches falls on every mode alike; each block gives the median of its steps, each
round a ratio to its own recording-only block, and the figure is the median of those ratios
with a bootstrap 95% interval.

The watcher is a process of its own (``live_gpu.py watcher``): it applies every message to
its :class:`memtui.live.state.LiveState`, the state ``memtui watch`` draws from, and notes
when a marker allocation (a unique size) first shows in that state's segments (the map and
the call sites) and in its trace (the event log), and when an OOM shows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MEMTUI_ROOT") or os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from live_gpu import MARK_BASE, MARK_STEP, Watcher, summary  # noqa: E402


def bootstrap(values: list[float], rounds: int = 4000, seed: int = 0) -> tuple[float, float]:
    """The 95% interval of the median of ``values`` by resampling them (percentile bootstrap)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def costs(args) -> dict:
    import torch

    torch.cuda.init()
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": []}
    full = torch.cuda.memory._snapshot
    for entries in (1_000, 10_000, 100_000):
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.memory._record_memory_history(max_entries=entries, stacks="python", clear_history=True)
        keep = [torch.empty(1 << 20, device="cuda") for _ in range(200)]  # blocks alive, with stacks
        for _ in range(entries // 3 + 10):
            x = torch.empty(4096, device="cuda")
            del x
        torch.cuda.synchronize()
        row = {"max_entries": entries, "live_blocks": len(keep)}
        times = []
        for _ in range(5):
            t = time.perf_counter()
            full()
            times.append(time.perf_counter() - t)
        row["snapshot_ms"] = statistics.median(times) * 1e3
        try:
            before = len(full()["device_traces"][0])
            times = []
            for _ in range(50):
                t = time.perf_counter()
                segs = torch._C._cuda_memorySnapshot((0, 0, False))["segments"]
                times.append(time.perf_counter() - t)
            row["segments_alone_ms"] = statistics.median(times) * 1e3
            row["segments"] = len(segs)
            after = full()["device_traces"][0]
            row["entries_recorded_by_50_reads"] = sum(1 for e in after[-60:] if e["action"] == "snapshot") - 1
            row["trace_len_before_after"] = [before, len(after)]
        except Exception as exc:  # noqa: BLE001 - what this torch says is the finding
            row["segments_alone"] = f"{type(exc).__name__}: {exc}"
        out["rows"].append(row)
        del keep
    torch.cuda.memory._record_memory_history(enabled=None)
    return out


def segments(args) -> dict:
    """One segments read in a training job, in its parts: torch's read, packing, encoding."""
    from memtui.live import protocol as p
    from memtui.live import wire

    torch, step = model_and_step(args)
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries, stacks="python")
    for _ in range(args.warmup):
        step()
    table = wire.FrameTable()
    out: dict = {}
    for label, reads in (("first", 1), ("again", 30)):
        rows = []
        for _ in range(reads):
            t0 = time.perf_counter()
            segs = torch._C._cuda_memorySnapshot((0, 0, False))["segments"]
            t1 = time.perf_counter()
            table.new_read()
            packed = wire.pack_segments(segs, table)
            _, frames = table.new_frames()
            t2 = time.perf_counter()
            frame = p.encode({"kind": p.DELTA, "segments": packed, "frames": frames})
            rows.append((t1 - t0, t2 - t1, time.perf_counter() - t2, len(frame)))
        out[label] = {"read_ms": statistics.median(r[0] for r in rows) * 1e3,
                      "pack_ms": statistics.median(r[1] for r in rows) * 1e3,
                      "encode_ms": statistics.median(r[2] for r in rows) * 1e3, "bytes": rows[-1][3]}
    out.update(segments=len(segs), blocks=sum(len(s.get("blocks") or []) for s in segs), frames=len(table.frames))
    return out


def model_and_step(args):
    import torch
    import transformers

    import memtui.record

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=8, n_positions=512,
                                     vocab_size=8192)
    model = transformers.GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 8192, (args.batch, 512), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        memtui.record.step()
        torch.cuda.synchronize()

    return torch, step


def ab(args) -> dict:
    from memtui.record.recording import Options, Session
    from memtui.record.serving import live

    torch, step = model_and_step(args)
    Session(Options(max_entries=args.max_entries)).start()  # recording on throughout: serving is measured
    for _ in range(args.warmup):
        step()
    watcher = Watcher()
    modes = ("record", "serve", "watch")
    blocks: dict[str, list[float]] = {m: [] for m in modes}
    stats = []
    rng = random.Random(0)
    started = time.time()
    for _ in range(args.rounds):
        if time.time() - started > args.seconds:
            break
        order = list(modes)
        rng.shuffle(order)
        for mode in order:
            session = live(max_entries=args.max_entries) if mode != "record" else None
            if mode == "watch":
                watcher.ask(f"attach {os.getpid()}")  # the first state is paid here, before the block
            for _ in range(2):
                step()
            steps = []
            for _ in range(args.steps):
                t = time.perf_counter()
                step()
                steps.append(time.perf_counter() - t)
            blocks[mode].append(statistics.median(steps))
            if mode == "watch":
                watcher.ask("detach")
            if session is not None:
                stats.append({"mode": mode, **session.server.stats.to_json()})
                session.stop()
    watcher.close()
    rounds = len(blocks["record"])
    result = {"model": f"GPT-2 {args.layers} layers, width {args.width}, batch {args.batch}x512, AdamW, bf16 autocast",
              "max_entries": args.max_entries, "steps_per_block": args.steps, "rounds": rounds,
              "median_step_ms": {m: statistics.median(v) * 1e3 for m, v in blocks.items()},
              "block_ms": {m: [round(b * 1e3, 3) for b in v] for m, v in blocks.items()}}
    for mode in ("serve", "watch"):
        ratios = [b / r - 1 for b, r in zip(blocks[mode], blocks["record"])]
        low, high = bootstrap(ratios)
        result[f"overhead_{mode}"] = {"median": statistics.median(ratios), "ci95": [low, high]}
    # A/A: recording-only blocks against each other (round i against round i+1) shows the noise floor
    aa = [b / a - 1 for a, b in zip(blocks["record"], blocks["record"][1:])]
    result["aa_spread"] = {"median": statistics.median(aa), "ci95": list(bootstrap(aa))} if aa else None
    for mode in ("serve", "watch"):
        rows = [s for s in stats if s["mode"] == mode]
        up = sum(s["uptime"] for s in rows) or 1.0
        result[f"server_{mode}"] = {"cpu_share": sum(s["cpu_seconds"] for s in rows) / up,
                                    "trace_share": sum(s["trace_seconds"] - s["state_seconds"] for s in rows) / up,
                                    "segment_share": sum(s.get("segment_seconds", 0.0) for s in rows) / up,
                                    "segment_reads": sum(s.get("segment_reads", 0) for s in rows),
                                    "trace_reads": sum(s["trace_reads"] for s in rows)}
    return result


def latency(args) -> dict:
    from memtui.record.serving import live

    torch, step = model_and_step(args)
    session = live(max_entries=args.max_entries)
    for _ in range(args.warmup):
        step()
    watcher = Watcher()
    watcher.ask(f"attach {os.getpid()}")
    marks: list[tuple[int, float]] = []
    held: list = []

    def mark(k: int) -> None:
        size = MARK_BASE + k * MARK_STEP
        held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        marks.append((size, time.time()))
        if len(held) > 3:  # each marker lives about a second: the map can show it
            held.pop(0)

    deadline = time.time() + args.train_seconds
    n = 0
    while time.time() < deadline:
        step()
        n += 1
        if n % 10 == 5:
            mark(len(marks))
    training = len(marks)
    held.clear()
    for k in range(args.idle_marks):
        time.sleep(0.5)
        mark(1000 + k)
        time.sleep(0.5)
        held.clear()
    oom_at = None
    try:
        torch.empty(1 << 46, dtype=torch.uint8, device="cuda")  # 64 TiB: refused at once
    except torch.cuda.OutOfMemoryError:
        oom_at = time.time()
    time.sleep(1.5)
    report = watcher.ask("report")
    watcher.ask("detach")
    watcher.close()
    server = session.server.stats.to_json()
    session.stop()

    def lag(where: str, chosen) -> dict:
        seen = report[where]
        values = [seen[str(size)] - at for size, at in chosen if str(size) in seen]
        return summary(values, len(chosen))

    return {"max_entries": args.max_entries, "steps": n,
            "training": {"map": lag("seg_marks", marks[:training]), "event_log": lag("marks", marks[:training]),
                         "event_log_seen": lag("seen_marks", marks[:training])},
            "idle": {"map": lag("seg_marks", marks[training:]), "event_log": lag("marks", marks[training:]),
                     "event_log_seen": lag("seen_marks", marks[training:])},
            "oom_message_s": [o["arrived"] - o["t"] for o in report["ooms"]],
            "oom_in_state_after_observer_s": [t - o["t"] for t, o in zip(report["oom_in_state"], report["ooms"])],
            "oom_raised": oom_at is not None,
            "oom_trace_after_observer_s": ([report["oom_state"][0] - report["ooms"][0]["t"]]
                                           if report["oom_state"] and report["ooms"] else []),
            "gaps": report["gaps"], "missed": report["missed"], "server": server}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("costs", "segments", "ab", "latency"))
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-entries", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=80.0, help="stop starting rounds after this long")
    parser.add_argument("--train-seconds", type=float, default=12.0)
    parser.add_argument("--idle-marks", type=int, default=6)
    args = parser.parse_args()
    print(json.dumps({"costs": costs, "segments": segments, "ab": ab, "latency": latency}[args.what](args)))


if __name__ == "__main__":
    main()
