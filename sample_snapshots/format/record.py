"""Record the snapshot layouts torch writes today, each small, with torch's own API only.

    python sample_snapshots/format/record.py --out DIR [SCENARIO ...]

Needs PyTorch and a CUDA GPU; imports nothing from memtui. Each scenario runs in a
process of its own and leaves ``DIR/NAME.pickle`` (and ``NAME.mempool.pickle``, a
segment-only file) and ``DIR/NAME.truth.json``: how it was recorded, which keyword
arguments this torch accepted, and what ``tests/fixtures/newer_torch.py`` needs to extend
a recording the way a newer torch writes it (the annotation sites). ``--probe`` prints the
signatures and markers of the installed torch; ``--summary DIR`` what each file holds.
sample_snapshots/format/README.md says what each file shows.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pickle
import subprocess
import sys
import time
import traceback

MiB = 1 << 20


def _torch():
    import torch

    return torch


def record_history(torch, facts: dict, **kwargs) -> None:
    """``_record_memory_history`` with the keyword arguments this torch accepts; the rest
    are named in ``facts['dropped_kwargs']``."""
    fn = torch.cuda.memory._record_memory_history
    params = inspect.signature(fn).parameters
    taken = {k: v for k, v in kwargs.items() if k in params}
    dropped = sorted(set(kwargs) - set(taken))
    if dropped:
        facts.setdefault("dropped_kwargs", []).extend(dropped)
    facts["record_kwargs"] = {k: v for k, v in taken.items()}
    fn(**taken)


def set_metadata(torch, value) -> bool:
    fn = getattr(torch.cuda.memory, "_set_memory_metadata", None) or getattr(torch._C, "_cuda_setMemoryMetadata",
                                                                               None)
    if fn is None:
        return False
    fn(value)
    return True


def dump(torch, path: str, facts: dict, augment: bool = False) -> None:
    torch.cuda.synchronize()
    facts["memory_allocated"] = torch.cuda.memory_allocated()
    facts["memory_reserved"] = torch.cuda.memory_reserved()
    if augment:
        params = inspect.signature(torch.cuda.memory._dump_snapshot).parameters
        if "augment_with_fx_traces" in params:
            torch.cuda.memory._dump_snapshot(path, augment_with_fx_traces=True)
            facts["augment_with_fx_traces"] = True
            return
        facts["augment_with_fx_traces"] = "not accepted by this torch"
    torch.cuda.memory._dump_snapshot(path)


def finish(out: str, facts: dict) -> None:
    torch = _torch()
    facts["torch"] = torch.__version__
    facts["gpu"] = torch.cuda.get_device_name(0)
    with open(out + ".truth.json", "w") as f:
        json.dump(facts, f, indent=2, sort_keys=True, default=repr)
        f.write("\n")


def _mlp(torch, width: int = 256):
    from torch import nn

    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.GELU(),
                         nn.Linear(width, 16)).cuda()


# -- scenarios -------------------------------------------------------------------------------


def backward_anomaly(out: str) -> None:
    """Anomaly mode on, stacks="python": backward allocations carry no frames of their own;
    each backward node is tagged through user_metadata so the fixture builder knows which
    node's forward traceback a newer torch attaches as ``forward_frames``."""
    torch = _torch()
    facts: dict = {"workload": "MLP(256) forward+backward under set_detect_anomaly(True), SGD, 2 steps"}
    model = _mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000)
    nodes: dict[str, dict] = {}
    for step in range(2):
        with torch.autograd.set_detect_anomaly(True):
            x = torch.randn(64, 256, device="cuda")
            loss = model(x).square().mean()
            _tag_backward_nodes(torch, loss, nodes, step)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    set_metadata(torch, "")
    facts["nodes"] = nodes
    dump(torch, out + ".pickle", facts)
    finish(out, facts)


def _tag_backward_nodes(torch, loss, nodes: dict, step: int) -> None:
    seen = set()
    todo = [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        todo.extend(n for n, _ in node.next_functions)
        tag = f"node:{step}:{len(nodes)}"
        meta = node.metadata
        nodes[tag] = {"name": node.name(), "traceback": list(meta.get("traceback_") or []), "windows": []}

        def pre(grad_outputs, tag=tag):
            nodes[tag]["windows"].append([time.time() * 1e6, None])
            set_metadata(torch, tag)

        def post(grad_inputs, grad_outputs, tag=tag):
            nodes[tag]["windows"][-1][1] = time.time() * 1e6
            set_metadata(torch, "")

        node.register_prehook(pre)
        node.register_hook(post)


def metadata(out: str) -> None:
    """user_metadata as plain strings and as the compact JSON that _set_memory_metadata
    writes for a dict in newer torch; annotation sites marked by a one-element allocation
    (the fixture builder turns each into the ``annotate`` entry a newer torch records)."""
    torch = _torch()
    facts: dict = {"workload": "MLP(256), a train phase and an eval phase under user_metadata, annotations"}
    model = _mlp(torch)
    keep = torch.empty(4, device="cuda")  # the small pool's first segment, before recording
    early = torch.empty(MiB, device="cuda")  # allocated before recording: a ghost block
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000)
    marks: list[dict] = []

    def annotate(tensor, label) -> None:
        set_metadata(torch, label)
        marker = torch.empty(1, device="cuda")
        marks.append({"label": label, "marker_addr": marker.data_ptr(),
                      "target_addr": tensor.untyped_storage().data_ptr()})
        del marker
        set_metadata(torch, "")

    accepted_dict = None
    try:
        accepted_dict = set_metadata(torch, {"phase": "probe"})
    except Exception as exc:  # noqa: BLE001 - recorded: what this torch does with a dict
        facts["dict_metadata_error"] = f"{type(exc).__name__}: {exc}"
    facts["dict_metadata_accepted"] = bool(accepted_dict)
    set_metadata(torch, "warmup")
    warm = torch.randn(128, 256, device="cuda")
    del warm
    for step in range(2):
        set_metadata(torch, json.dumps({"phase": "train", "step": step}, separators=(",", ":")))
        x = torch.randn(64, 256, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    set_metadata(torch, json.dumps({"phase": "eval", "step": 1}, separators=(",", ":")))
    with torch.no_grad():
        kept = model(torch.randn(512, 256, device="cuda"))
    set_metadata(torch, "")
    annotate(kept, json.dumps({"role": "eval output"}, separators=(",", ":")))
    annotate(model[0].weight, "layer0.weight")
    annotate(early, "allocated before recording")
    scratch = torch.empty(4 * MiB, device="cuda")
    annotate(scratch, "scratch, first life")
    scratch_addr = scratch.data_ptr()
    del scratch
    scratch = torch.empty(4 * MiB, device="cuda")  # the same address again: the label ends
    facts["scratch_reused_address"] = scratch.data_ptr() == scratch_addr
    facts["marks"] = marks
    dump(torch, out + ".pickle", facts)
    del keep
    finish(out, facts)


def _net(torch):
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net1 = nn.Linear(256, 256)
            self.relu = nn.ReLU()
            self.net2 = nn.Linear(256, 16)

        def forward(self, x):
            a = self.net1(x)
            b = self.relu(a)
            c = self.net2(b)
            return c

    return Net().cuda()


def _fx_registry() -> dict:
    """What torch registered for each generated FX file: per node, its name, op, target
    and stack_trace (what augment_with_fx_traces reads)."""
    try:
        from torch.fx.traceback import _FX_METADATA_REGISTRY
    except ImportError:
        return {}
    out = {}
    for filename, meta in _FX_METADATA_REGISTRY.items():
        nodes = {str(k): {f: (None if v.get(f) is None else str(v.get(f))) for f in ("name", "op", "target",
                                                                                     "stack_trace")}
                 for k, v in (meta.get("node_metadata") or {}).items()}
        out[filename] = {"lineno_map": {str(k): v for k, v in (meta.get("lineno_map") or {}).items()},
                         "prologue_start": meta.get("prologue_start"), "nodes": nodes}
    return out


def fx_module(out: str) -> None:
    """A user-defined module under torch.compile(backend="aot_eager"), compile_context=True,
    dumped with augment_with_fx_traces=True; the FX metadata registry saved beside."""
    torch = _torch()
    facts: dict = {"workload": "Net (Linear, ReLU, Linear, defined in this file) under "
                               "torch.compile(backend='aot_eager'), forward+backward, 2 steps"}
    _enrich(facts)
    model = _net(torch)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000,
                   compile_context=True)
    for _ in range(2):
        loss = compiled(torch.randn(64, 256, device="cuda")).square().mean()
        loss.backward()
    dump(torch, out + ".pickle", facts, augment=True)
    facts["fx_registry_files"] = sorted(_fx_registry())
    finish(out, facts)


def _enrich(facts: dict) -> None:
    for where, name in (("torch._dynamo.config", "enrich_profiler_metadata"),
                        ("torch.fx.experimental._config", "enrich_profiler_metadata")):
        try:
            module = __import__(where, fromlist=["_"])
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, True)
            facts.setdefault("configs_set", []).append(f"{where}.{name}")


def backward_anomaly_all(out: str) -> None:
    """Anomaly mode on, stacks="all": backward allocations carry C++ stacks naming their
    node, and forward_frames naming the forward line."""
    torch = _torch()
    facts: dict = {"workload": "MLP(256) forward+backward under set_detect_anomaly(True), 1 step, stacks='all'"}
    model = _mlp(torch)
    record_history(torch, facts, enabled="all", context="all", stacks="all", max_entries=100_000)
    with torch.autograd.set_detect_anomaly(True):
        loss = model(torch.randn(64, 256, device="cuda")).square().mean()
        loss.backward()
    dump(torch, out + ".pickle", facts)
    finish(out, facts)


def fx_compile(out: str) -> None:
    """torch.compile(backend="aot_eager") with compile_context=True, dumped with
    augment_with_fx_traces=True: FX frames with their node and the original source."""
    torch = _torch()
    facts: dict = {"workload": "MLP(256) under torch.compile(backend='aot_eager'), forward+backward, 2 steps"}
    for where, name in (("torch._dynamo.config", "enrich_profiler_metadata"),
                        ("torch.fx.experimental._config", "enrich_profiler_metadata")):
        try:
            module = __import__(where, fromlist=["_"])
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, True)
            facts.setdefault("configs_set", []).append(f"{where}.{name}")
    model = _mlp(torch)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000,
                   compile_context=True)
    for _ in range(2):
        loss = compiled(torch.randn(64, 256, device="cuda")).square().mean()
        loss.backward()
    dump(torch, out + ".pickle", facts, augment=True)
    finish(out, facts)


def _small_training(torch, steps: int, width: int = 256) -> None:
    model = _mlp(torch, width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        loss = model(torch.randn(64, width, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def _skip(out: str, skip: list[str], what: str) -> None:
    torch = _torch()
    facts: dict = {"workload": f"MLP(256), Adam, 3 steps, empty_cache, 2 more steps; {what}"}
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000,
                   skip_actions=skip)
    _small_training(torch, 3)
    torch.cuda.empty_cache()
    _small_training(torch, 2)
    dump(torch, out + ".pickle", facts)
    finish(out, facts)


def skip_requested_segments(out: str) -> None:
    _skip(out, ["free_requested", "segment_alloc", "segment_free"],
          "skip_actions: free_requested, segment_alloc, segment_free")


def skip_free_completed(out: str) -> None:
    _skip(out, ["free_completed"], "skip_actions: free_completed")


def ring_overflow(out: str) -> None:
    torch = _torch()
    facts: dict = {"workload": "MLP(256), Adam, 20 steps through a 300-entry ring buffer"}
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=300)
    _small_training(torch, 20)
    dump(torch, out + ".pickle", facts)
    finish(out, facts)


def private_pools(out: str) -> None:
    """A CUDA graph captured into its own pool, a second graph sharing it, a MemPool used
    through use_mem_pool; the MemPool's own segment-only snapshot written beside."""
    torch = _torch()
    facts: dict = {"workload": "MLP(256) captured in a CUDA graph (private pool), a second graph on the same "
                               "pool, a torch.cuda.MemPool with two tensors"}
    model = _mlp(torch)
    static_in = torch.randn(64, 256, device="cuda")
    record_history(torch, facts, enabled="all", context="all", stacks="python", max_entries=100_000)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = model(static_in)
    graph2 = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph2, pool=graph.pool()):
        static_out2 = static_out * 2
    for _ in range(3):
        static_in.copy_(torch.randn(64, 256, device="cuda"))
        graph.replay()
        graph2.replay()
    facts["graph_pool"] = list(graph.pool())
    pool = torch.cuda.MemPool()
    facts["mempool_id"] = list(pool.id)
    facts["graph_pool_handle"] = list(torch.cuda.graph_pool_handle())
    with torch.cuda.use_mem_pool(pool):
        a = torch.randn(1024, 1024, device="cuda")
        b = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
    del b
    facts["mempool_tensor"] = a.data_ptr()
    dump(torch, out + ".pickle", facts)
    segments = pool.snapshot()
    with open(out + ".mempool.pickle", "wb") as f:
        pickle.dump(segments, f, protocol=4)
    facts["mempool_snapshot_type"] = type(segments).__name__
    del static_out2
    finish(out, facts)


SCENARIOS = {
    "backward_anomaly": backward_anomaly,
    "metadata": metadata,
    "fx_compile": fx_compile,
    "fx_module": fx_module,
    "backward_anomaly_all": backward_anomaly_all,
    "skip_requested_segments": skip_requested_segments,
    "skip_free_completed": skip_free_completed,
    "ring_overflow": ring_overflow,
    "private_pools": private_pools,
}


# -- what the installed torch has ----------------------------------------------------------------


def probe() -> None:
    torch = _torch()
    print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda")
    mem = torch.cuda.memory
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot", "_set_memory_metadata",
                 "_get_memory_metadata", "_annotate_memory", "_annotate_tensor", "memory_snapshot"):
        fn = getattr(mem, name, None)
        try:
            print(f"torch.cuda.memory.{name}", inspect.signature(fn) if fn else "missing")
        except (TypeError, ValueError) as exc:
            print(f"torch.cuda.memory.{name}", "signature unknown:", exc)
    for owner, name in ((torch.cuda, "MemPool"), (torch.cuda, "use_mem_pool"), (torch.cuda, "graph_pool_handle")):
        print(f"torch.cuda.{name}", "present" if hasattr(owner, name) else "missing")
    if hasattr(torch.cuda, "MemPool"):
        print("MemPool.snapshot", inspect.signature(torch.cuda.MemPool.snapshot))
    acc = getattr(torch, "accelerator", None)
    print("torch.accelerator.memory", sorted(n for n in dir(getattr(acc, "memory", None)) if not n.startswith("__"))
          if acc is not None and hasattr(acc, "memory") else "missing")
    root = os.path.dirname(torch.__file__)
    markers = [b"forward_frames", b"trace_alloc_overflowed", b"trace_alloc_max_entries", b"internal_metadata",
               b"user_metadata", b"skip_actions", b"fx_node_op", b"fx_original_trace", b"\x00annotate\x00"]
    for lib in ("lib/libtorch_python.so", "lib/libc10_cuda.so", "lib/libtorch_cuda.so"):
        path = os.path.join(root, lib)
        if not os.path.exists(path):
            print(lib, "missing")
            continue
        with open(path, "rb") as f:
            data = f.read()
        print(lib, {m.decode(errors="replace").strip("\x00"): m in data for m in markers})
    for rel in ("cuda/memory.py", "cuda/_memory_viz.py", "utils/viz/MemoryViz.js"):
        path = os.path.join(root, rel)
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        print(rel, {m.decode(errors="replace").strip("\x00"): m.decode(errors="replace").strip("\x00") in text
                    for m in markers})


def summary(folder: str) -> None:
    """What each recorded file holds: entry keys, actions, frame keys, settings, pools."""
    from collections import Counter

    for name in sorted(os.listdir(folder)):
        if not name.endswith(".pickle"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            snap = pickle.load(f)
        print(f"== {name} ({os.path.getsize(os.path.join(folder, name)):,} bytes)")
        if isinstance(snap, list):
            print("  a bare list of", len(snap), "segments; pools", Counter(tuple(s.get("segment_pool_id", ()))
                                                                         for s in snap))
            continue
        print("  top keys", sorted(snap))
        print("  allocator_settings", snap.get("allocator_settings"))
        keys, actions, frame_keys, meta_types, ctx = Counter(), Counter(), Counter(), Counter(), Counter()
        shown = False
        for trace in snap.get("device_traces", []):
            for e in trace:
                keys.update(e.keys())
                actions[e.get("action")] += 1
                meta_types[type(e.get("user_metadata")).__name__] += 1
                ctx[e.get("compile_context")] += 1
                for fr in e.get("frames") or []:
                    frame_keys.update(fr.keys())
                if "forward_frames" in e and not shown:
                    shown = True
                    print("  forward_frames sample", e["forward_frames"][:3])
        print("  entry keys", dict(keys))
        print("  actions", dict(actions))
        print("  frame keys", dict(frame_keys))
        print("  user_metadata types", dict(meta_types), "contexts", dict(ctx.most_common(5)))
        fx = [fr for t in snap.get("device_traces", []) for e in t for fr in e.get("frames") or []
              if "fx_node_op" in fr]
        if fx:
            print("  fx frame sample", fx[0])
        files = Counter(fr.get("filename") for t in snap.get("device_traces", []) for e in t
                        for fr in e.get("frames") or [])
        print("  generated files", [f for f in files if "fx_generated" in str(f) or "eval_with_key" in str(f)][:5])
        seg_keys = Counter(k for s in snap.get("segments", []) for k in s)
        block_keys = Counter(k for s in snap.get("segments", []) for b in s.get("blocks", []) for k in b)
        print("  block keys", dict(block_keys))
        print("  segment keys", dict(seg_keys), "pools", Counter(tuple(s.get("segment_pool_id", ()))
                                                              for s in snap.get("segments", [])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--summary", metavar="DIR")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if args.probe:
        probe()
        return 0
    if args.summary:
        summary(args.summary)
        return 0
    if args.one:
        try:
            SCENARIOS[args.one](os.path.join(args.out, args.one))
        except Exception:
            traceback.print_exc()
            return 1
        return 0
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in args.scenarios or list(SCENARIOS):
        started = time.time()
        code = subprocess.run([sys.executable, __file__, "--out", args.out, "--one", name]).returncode
        print(f"{name}: {'ok' if code == 0 else f'exit {code}'} ({time.time() - started:.0f}s)", flush=True)
        if code:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
