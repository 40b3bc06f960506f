"""GPU figures for docs/watch.md: what live serving costs a job, and how soon a watcher sees it.

Run on a CUDA machine from the repository root (memtui importable, torch and transformers
installed)::

    python benchmarks/live_gpu.py costs            # torch's primitives against the history length
    python benchmarks/live_gpu.py train            # step time: recording / + serving / + a watcher
    python benchmarks/live_gpu.py oom              # a batch that grows until OOM, watched; the freeze
    python benchmarks/live_gpu.py ranks            # torchrun, 2 ranks on one GPU (gloo), MEMTUI_LIVE=1

Each prints one JSON object on its last line. The watcher is a process of its own
(``watcher`` below), so its work never shares the job's interpreter; latencies are
measured at the protocol level: the job notes the wall-clock time of a GPU allocation or
an OOM, the watcher the time the message that shows it arrived (one host, one clock).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MEMTUI_ROOT") or os.path.dirname(HERE)
MARK_BASE = 64 << 20  # marker allocations: 64 MiB plus a multiple of MARK_STEP, unique per marker
MARK_STEP = 512 * 7


def median(values):
    return statistics.median(values) if values else None


def timed(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return median(out)


# -- torch's primitives ---------------------------------------------------------------------
def costs(args) -> dict:
    import torch

    names = sorted(n for n in dir(torch._C) if any(k in n.lower() for k in ("trace", "observer", "snapshot",
                                                                              "history", "memorystats")))
    torch.cuda.init()
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "torch_C_names": names,
              "rows": []}
    for entries in (1_000, 10_000, 100_000):
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.memory._record_memory_history(max_entries=entries, stacks="python", clear_history=True)
        for _ in range(entries // 3 + 10):  # alloc, free_requested, free_completed
            x = torch.empty(4096, device="cuda")
            del x
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        n = len(snap["device_traces"][0])
        result["rows"].append({
            "max_entries": entries, "trace_entries": n,
            "memory_stats_us": timed(lambda: torch.cuda.memory_stats(0), 200) * 1e6,
            "mem_get_info_us": timed(lambda: torch.cuda.mem_get_info(0), 200) * 1e6,
            "snapshot_ms": timed(torch.cuda.memory._snapshot, 5) * 1e3,
        })
    torch.cuda.memory._record_memory_history(enabled=None)
    return result


# -- the watcher process ----------------------------------------------------------------------
def watcher(args) -> None:
    """Reads commands on stdin: ``attach PID`` (waits for the first state, says ``attached``),
    ``detach``, ``freeze PATH``, ``report``; prints one JSON line per answer."""
    sys.path.insert(0, ROOT)
    from memtui.live.client import LiveClient
    from memtui.live.runtime import list_jobs
    from memtui.record.files import write_snapshot

    client = None
    marks: dict[int, float] = {}  # marker size -> arrival of the trace entry
    samples: list[tuple[float, int]] = []  # arrival, allocated on the job's device
    ooms: list[dict] = []
    oom_state: list[float] = []  # arrival of each state or delta holding an oom entry
    reads: list[float] = []
    seg_marks: dict[int, float] = {}  # marker size -> when the state's segments first held it
    seen_marks: dict[int, float] = {}  # marker size -> when the log's entries seen in the segments held it
    oom_in_state: list[float] = []  # when the state first held each oom message

    def hook(state_apply):
        def apply(message):
            now = time.time()
            state_apply(message)
            kind = message["kind"]
            if kind in ("state", "delta"):
                for seg in client.state.segments:  # the segments the view's map is drawn from
                    for b in seg.get("blocks") or []:
                        size = b.get("size") or 0
                        if (b.get("state") == "active_allocated" and size >= MARK_BASE
                                and (size - MARK_BASE) % MARK_STEP == 0):
                            seg_marks.setdefault(size, time.time())
                for entries in client.state.seen.values():  # the event log's tail between trace reads
                    for e in entries:
                        size = e.get("size") or 0
                        if e.get("action") == "alloc" and size >= MARK_BASE and (size - MARK_BASE) % MARK_STEP == 0:
                            seen_marks.setdefault(size, time.time())
            if kind == "oom":
                oom_in_state.append(time.time())
            if kind == "counters" and message["devices"]:
                samples.append((now, message["devices"][0]["allocated"]))
            elif kind in ("state", "delta"):
                reads.append(now)
                lists = (message["snapshot"]["device_traces"] if kind == "state"
                         else list(message["traces"].values()))
                for entries in lists:  # entries as they travel: [action, addr, size, ...] (memtui.live.wire)
                    if any(e[0] == "oom" for e in entries):
                        oom_state.append(now)
                    for e in entries:
                        size = e[2] or 0
                        if e[0] == "alloc" and size >= MARK_BASE and (size - MARK_BASE) % MARK_STEP == 0:
                            marks.setdefault(size, now)
            elif kind == "oom":
                ooms.append({"arrived": now, "t": message.get("t"), "requested": message.get("requested")})
        return apply

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "attach":
            pid = int(words[1])
            job = next(j for j in list_jobs() if j.pid == pid)
            client = LiveClient(job)
            client.state.apply = hook(client.state.apply)
            client.connect()
            client.wait_for(lambda s: s.has_state, 120)
            print(json.dumps({"attached": pid}), flush=True)
        elif words[0] == "detach":
            if client is not None:
                client.close()
                client = None
            print(json.dumps({"detached": True}), flush=True)
        elif words[0] == "freeze":
            started = time.time()
            snapshot = client.freeze(120)
            took = time.time() - started
            write_snapshot(snapshot, words[1])
            print(json.dumps({"frozen": words[1], "seconds": took}), flush=True)
        elif words[0] == "report":
            print(json.dumps({"marks": {str(k): v for k, v in marks.items()}, "samples": samples[-20000:],
                              "ooms": ooms, "oom_state": oom_state, "reads": len(reads),
                              "seg_marks": {str(k): v for k, v in seg_marks.items()}, "oom_in_state": oom_in_state,
                              "seen_marks": {str(k): v for k, v in seen_marks.items()},
                              "gaps": client.state.gaps if client else None,
                              "missed": client.state.missed if client else None}), flush=True)
        elif words[0] == "quit":
            break


class Watcher:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "watcher"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def ask(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        except OSError:
            pass
        self.proc.wait(30)


# -- a training loop ---------------------------------------------------------------------------
def train(args) -> dict:
    import torch
    import transformers

    sys.path.insert(0, ROOT)
    import memtui.record
    from memtui.record.recording import Options, Session
    from memtui.record.serving import live

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=512, n_head=8, n_positions=512, vocab_size=8192)
    model = transformers.GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    Session(Options(max_entries=args.max_entries)).start()  # recording already on: serving is what is measured
    held: list = []

    def step(mark: int | None = None):
        x = torch.randint(0, 8192, (args.batch, 512), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        if mark is not None:  # a marker allocation: its size is unique, its time noted now
            held.append(torch.empty(MARK_BASE + mark * MARK_STEP, dtype=torch.uint8, device="cuda"))
            marks.append((MARK_BASE + mark * MARK_STEP, time.time()))
        opt.step()
        opt.zero_grad(set_to_none=True)
        memtui.record.step()
        if len(held) > 1:
            held.pop(0)

    marks: list[tuple[int, float]] = []
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    watcher_proc = Watcher()
    blocks: dict[str, list[float]] = {"record": [], "serve": [], "watch": []}
    session = None
    server_stats = []
    mark = 0
    modes = ("record", "serve", "watch")
    for round_ in range(args.rounds):
        # The order turns each round, so a drift in step time (clocks, caches) falls on every mode.
        for mode in modes[round_ % 3:] + modes[: round_ % 3]:
            if mode != "record":
                session = live(max_entries=args.max_entries)
            if mode == "watch":
                watcher_proc.ask(f"attach {os.getpid()}")
            torch.cuda.synchronize()
            started = time.perf_counter()
            for i in range(args.steps):
                use_mark = mode == "watch" and i % 10 == 5
                step(mark if use_mark else None)
                mark += use_mark
            torch.cuda.synchronize()
            blocks[mode].append((time.perf_counter() - started) / args.steps)
            if mode == "watch":
                watcher_proc.ask("detach")
            if session is not None:
                server_stats.append({"mode": mode, **session.server.stats.to_json()})
                session.stop()
                session = None
    # Idle: the job does nothing but a marker a second; the counters show each one alone.
    session = live(max_entries=args.max_entries)
    watcher_proc.ask(f"attach {os.getpid()}")
    idle_marks = []
    for k in range(args.idle_marks):
        time.sleep(0.5)
        before = torch.cuda.memory_allocated()
        t = torch.empty(MARK_BASE + (10_000 + k) * MARK_STEP, dtype=torch.uint8, device="cuda")
        at = time.time()
        idle_marks.append((MARK_BASE + (10_000 + k) * MARK_STEP, at, before))
        time.sleep(0.5)
        del t
    report = watcher_proc.ask("report")
    watcher_proc.ask("detach")
    server_stats.append({"mode": "idle", **session.server.stats.to_json()})
    session.stop()
    watcher_proc.close()

    trace_latency = [report["marks"][str(size)] - at for size, at in marks if str(size) in report["marks"]]
    idle_trace = [report["marks"][str(size)] - at for size, at, _ in idle_marks if str(size) in report["marks"]]
    counter_latency = []
    for size, at, before in idle_marks:
        seen = [t for t, allocated in report["samples"] if t >= at and allocated >= before + size]
        if seen:
            counter_latency.append(seen[0] - at)
    base = median(blocks["record"])
    paired = {m: [b / r - 1 for b, r in zip(blocks[m], blocks["record"])] for m in ("serve", "watch")}
    return {
        "model": f"GPT-2 {args.layers} layers, width 512, batch {args.batch}x512, AdamW, bf16 autocast",
        "max_entries": args.max_entries, "steps_per_block": args.steps, "rounds": args.rounds,
        "step_ms": {k: [v * 1e3 for v in vs] for k, vs in blocks.items()},
        "median_step_ms": {k: median(vs) * 1e3 for k, vs in blocks.items()},
        "overhead_serve": median(blocks["serve"]) / base - 1, "overhead_watch": median(blocks["watch"]) / base - 1,
        "overhead_paired_median": {m: median(v) for m, v in paired.items()}, "overhead_paired": paired,
        "trace_latency_s": {"training": summary(trace_latency, len(marks)),
                            "idle": summary(idle_trace, len(idle_marks))},
        "counter_latency_s_idle": summary(counter_latency, len(idle_marks)),
        "watcher_missed": report["missed"], "server": server_stats,
    }


def summary(values, asked):
    if not values:
        return {"seen": 0, "of": asked}
    values = sorted(values)
    return {"seen": len(values), "of": asked, "median": median(values), "max": values[-1],
            "p90": values[int(0.9 * (len(values) - 1))]}


# -- a batch that grows until OOM, then the freeze -----------------------------------------------
def oom(args) -> dict:
    import torch

    sys.path.insert(0, ROOT)
    import memtui.record
    from memtui.record.serving import live

    torch.cuda.set_per_process_memory_fraction(args.cap_gib * (1 << 30) / torch.cuda.mem_get_info(0)[1])
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    session = live()
    watcher_proc = Watcher()
    watcher_proc.ask(f"attach {os.getpid()}")
    batch = 1024
    oom_at = None
    try:
        while True:
            x = torch.randn(batch, 1024, device="cuda")
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
            memtui.record.step()
            batch *= 2
    except torch.cuda.OutOfMemoryError:
        oom_at = time.time()
    del x
    torch.cuda.synchronize()
    time.sleep(1.0)
    report = watcher_proc.ask("report")
    folder = args.out
    frozen = os.path.join(folder, "frozen.pickle")
    dumped = os.path.join(folder, "dumped.pickle")
    answer = watcher_proc.ask(f"freeze {frozen}")
    torch.cuda.memory._dump_snapshot(dumped)  # the job's own dump, right after: nothing ran between
    watcher_proc.ask("detach")
    watcher_proc.close()
    session.stop()
    infos = {}
    for name, path in (("frozen", frozen), ("dumped", dumped)):
        done = subprocess.run([sys.executable, "-m", "memtui", "info", "--json", "--no-cache", path],
                              capture_output=True, text=True, cwd=ROOT)
        infos[name] = json.loads(done.stdout) if done.returncode == 0 else done.stderr
    oom_latency = [o["arrived"] - o["t"] for o in report["ooms"]]
    oom_state_latency = ([report["oom_state"][0] - report["ooms"][0]["t"]]
                         if report["oom_state"] and report["ooms"] else [])
    return {"batch_at_oom": batch, "cap_gib": args.cap_gib, "ooms_seen": len(report["ooms"]),
            "oom_latency_s": oom_latency, "oom_state_latency_s": oom_state_latency,
            "oom_raised_at_minus_observer": (oom_at - report["ooms"][0]["t"])
            if report["ooms"] and oom_at else None,
            "freeze_seconds": answer["seconds"], "info": infos}


# -- two ranks under torchrun -----------------------------------------------------------------
RANK_JOB = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.cuda.set_device(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2048, 2048).cuda(), device_ids=[0])
opt = torch.optim.AdamW(model.parameters())
extra = [torch.empty((rank + 1) * (256 << 20), dtype=torch.uint8, device="cuda")]
deadline = time.time() + float(os.environ.get("RANK_SECONDS", "20"))
while time.time() < deadline:
    model(torch.randn(512, 2048, device="cuda")).sum().backward()
    opt.step(); opt.zero_grad()
    time.sleep(0.05)
dist.destroy_process_group()
"""


def ranks(args) -> dict:
    sys.path.insert(0, ROOT)
    from memtui.live.client import read_status
    from memtui.live.runtime import list_jobs

    script = os.path.join(args.out, "rank_job.py")
    with open(script, "w") as fh:
        fh.write(RANK_JOB)
    env = {**os.environ, "MEMTUI_LIVE": "1", "RANK_SECONDS": "20",
           "PYTHONPATH": os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH", "")] if p)}
    launcher = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", script],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.time() + 60
    while time.time() < deadline and len(seen) < 2:
        seen = list_jobs()
        time.sleep(0.5)
    time.sleep(5)
    statuses = [read_status(j) for j in list_jobs()]
    order = sorted(statuses, key=lambda s: min((d["headroom"] for d in s["devices"] if d["headroom"] is not None),
                                               default=1 << 62))
    output, _ = launcher.communicate(timeout=120)
    after = list_jobs()
    return {"jobs_seen": [{"pid": j.pid, "rank": j.rank, "job": j.job, "devices": j.devices} for j in seen],
            "status": statuses, "closest_to_limit_first": [s["rank"] for s in order],
            "launcher_status": launcher.returncode, "left_after_exit": len(after), "output_tail": output[-3000:]}


# -- the view itself: the watch app, headless, against a job that allocates when told ----------
def idlejob(args) -> None:
    """Allocates, frees and runs out of memory when told on stdin; prints the time of each."""
    import torch

    sys.path.insert(0, ROOT)
    from memtui.record.serving import live

    torch.cuda.set_per_process_memory_fraction(args.cap_gib * (1 << 30) / torch.cuda.mem_get_info(0)[1])
    base = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # noqa: F841 - memory that stays
    session = live(max_entries=args.max_entries)
    training = threading.Event()
    if args.train:  # a job at work: a small GPT-2 trains in a thread while the commands come
        import transformers

        config = transformers.GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=256, vocab_size=8192)
        model = transformers.GPT2LMHeadModel(config).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, 8192, (8, 256), device="cuda")
        training.set()

        def train() -> None:
            while training.is_set():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    model(input_ids=x, labels=x).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()

        threading.Thread(target=train, daemon=True).start()
    print("ready", flush=True)
    held = None
    for line in sys.stdin:
        words = line.split()
        t = time.time()
        if words[0] == "alloc":
            held = torch.empty(int(words[1]), dtype=torch.uint8, device="cuda")
        elif words[0] == "free":
            held = None
        elif words[0] == "oom":
            try:
                held = torch.empty(int(args.cap_gib * 2) << 30, dtype=torch.uint8, device="cuda")
            except torch.cuda.OutOfMemoryError:
                pass
        elif words[0] == "quit":
            break
        print(json.dumps({"t": t}), flush=True)
    training.clear()
    del held
    session.stop()


def view(args) -> dict:
    """Time from a GPU allocation (and an OOM) to what the watch app shows, polled every 5 ms."""
    import asyncio

    sys.path.insert(0, ROOT)
    from memtui.live.runtime import list_jobs
    from memtui.tui.screens.live import LiveScreen
    from memtui.tui.watch_app import WatchApp

    job = subprocess.Popen([sys.executable, os.path.abspath(__file__), "idlejob", "--cap-gib", str(args.cap_gib),
                            "--max-entries", str(args.max_entries)] + (["--train"] if args.train else []),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, cwd=ROOT)
    assert job.stdout.readline().strip() == "ready"
    jobs = [j for j in list_jobs() if j.pid == job.pid]

    def tell(command: str) -> float:
        job.stdin.write(command + "\n")
        job.stdin.flush()
        return json.loads(job.stdout.readline())["t"]

    result: dict = {"counters": [], "trace": [], "oom": None}

    async def drive() -> None:
        app = WatchApp(jobs, out_dir=args.out)
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.time() + 60
            while not (isinstance(app.screen, LiveScreen) and app.screen.view is not None):
                if time.time() > deadline:
                    raise AssertionError(f"no live view after 60 s: {app.screen!r}")
                await pilot.pause(0.05)
            screen = app.screen

            def header() -> str:
                return str(screen.query_one("#live-header").render())

            def traced(size: int) -> bool:
                v = screen.view
                return v is not None and bool((v.device.trace.size.astype("int64") == size).any())

            for k in range(args.idle_marks):
                size = MARK_BASE + (20_000 + k) * MARK_STEP
                await pilot.pause(0.3)
                before = header().split(" alloc ", 1)[-1].split(" res ")[0]
                sent = await asyncio.to_thread(tell, f"alloc {size}")
                seen_counter = seen_trace = None
                deadline = time.time() + 30
                while (seen_counter is None or seen_trace is None) and time.time() < deadline:
                    now = time.time()
                    if seen_counter is None and header().split(" alloc ", 1)[-1].split(" res ")[0] != before:
                        seen_counter = now
                    if seen_trace is None and traced(size):
                        seen_trace = now
                    await pilot.pause(0.005)
                result["counters"].append(None if seen_counter is None else seen_counter - sent)
                result["trace"].append(None if seen_trace is None else seen_trace - sent)
                await asyncio.to_thread(tell, "free")
            sent = await asyncio.to_thread(tell, "oom")
            deadline = time.time() + 30
            while time.time() < deadline:
                if screen.query_one("#oom").display:
                    result["oom"] = time.time() - sent
                    result["oom_text"] = str(screen.query_one("#oom").render())[:800]
                    break
                await pilot.pause(0.005)
            job.stdin.write("quit\n")
            job.stdin.flush()

    try:
        asyncio.run(drive())
    finally:
        try:  # a failure above must not leave the job waiting for its next command
            job.stdin.write("quit\n")
            job.stdin.flush()
        except OSError:
            pass
        job.wait(60)
    for key in ("counters", "trace"):
        values = [v for v in result[key] if v is not None]
        result[key + "_summary"] = summary(values, len(result[key]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("costs", "train", "oom", "ranks", "watcher", "view", "idlejob"))
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-entries", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--idle-marks", type=int, default=8)
    parser.add_argument("--cap-gib", type=float, default=4.0)
    parser.add_argument("--out", default=tempfile.gettempdir())
    parser.add_argument("--train", action="store_true", help="view: the job trains while it is watched")
    args = parser.parse_args()
    if args.what in ("watcher", "idlejob"):
        {"watcher": watcher, "idlejob": idlejob}[args.what](args)
        return
    result = {"costs": costs, "train": train, "oom": oom, "ranks": ranks, "view": view}[args.what](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
