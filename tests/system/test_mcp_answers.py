"""``memtui mcp`` answers an agent can afford: bounded, strict, cancellable, in the tools' terms.

Driven by the SDK's own client (tests/system/test_mcp.py's ``Client``) against a server
of this module's own, so cancelling and timing here never slow the other module's calls.
"""

from __future__ import annotations

import asyncio
import json
import lzma
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtui.services.catalog import SPECS
from tests.conftest import ROOT, SAMPLES, SHARED
from tests.system.test_mcp import CYCLES, LEAK, OOM, Client, data_of

pytest.importorskip("mcp")

BIG = SHARED / "big_trace.pickle.xz"
FLAGS = {o.cli_flag for spec in SPECS for o in spec.option_list() if not o.positional}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    roots = ["--root", str(SAMPLES)] + (["--root", str(SHARED)] if SHARED.is_dir() else [])
    c = Client([*roots, "--cache-dir", str(tmp_path_factory.mktemp("mcp-cache"))])
    yield c
    c.close()


def error_text(result) -> str:
    assert result.is_error
    [item] = result.content
    assert "\n" not in item.text and len(item.text) <= 500
    return item.text


def test_unknown_arguments_and_wrong_types_are_errors_that_name_them(client):
    assert "unknown argument 'lim' (the arguments are path, device, filter, start, limit, max_chars)" in \
        error_text(client.call("events", {"path": OOM, "lim": 5}))
    assert "limit: input should be a valid integer, not True" in \
        error_text(client.call("events", {"path": OOM, "limit": True}))
    assert "limit: input should be a valid integer, not '5'" in \
        error_text(client.call("events", {"path": OOM, "limit": "5"}))
    assert "path is required" in error_text(client.call("leaks", {}))
    assert "unknown argument" in error_text(client.call("list_snapshots", {"folder": None, "recursive": True}))
    huge = "x" * 6000  # an error quotes what it was given, clipped
    assert "characters]" in error_text(client.call("snapshot_info", {"path": huge}))
    assert "characters]" in error_text(client.call("events", {"path": OOM, huge: 1}))


def test_a_filter_nested_too_deep_is_an_error_result(client):
    deep = "(" * 400 + "size>1" + ")" * 400
    assert "nests parentheses and 'not' more than 100 deep" in \
        error_text(client.call("events", {"path": OOM, "filter": deep}))
    assert data_of(client.call("events", {"path": OOM, "limit": 1}))["rows"]  # and the server goes on


def test_answers_speak_in_tool_terms(client):
    texts = [client.call("explain_oom", {"path": OOM, "max_chars": 10**6}).content[0].text,
             client.call("reference_cycles", {"path": CYCLES, "max_chars": 10**6}).content[0].text,
             client.call("leaks", {"path": LEAK}).content[0].text,
             error_text(client.call("memory_breakdown", {"path": str(SAMPLES / "train_linear_adam.pickle.xz"),
                                                         "at": "oom"}))]
    for text in texts:
        assert not re.search(r"\bmemtui [a-z]+ SNAP", text), text
        assert not {flag for flag in FLAGS if re.search(rf"(?<![\w-]){flag}\b", text)}, text
    assert "at=oom" in texts[-1]


def test_rows_are_compact_and_frames_short(client):
    data = data_of(client.call("events", {"path": OOM, "limit": 20}))
    for row in data["rows"]:
        assert "time_us" not in row and "addr" not in row and None not in row.values() and "N/A" not in row.values()
    address_n = data_of(client.call("top_allocations", {"path": LEAK, "limit": 1}))["rows"][0]["address_n"]
    stack = data_of(client.call("allocation_stack", {"path": LEAK, "address_n": address_n}))
    frames = [f for event in stack["events"].values() for f in event["stack"]] + stack["block"]["stack"]
    assert frames and all(isinstance(f, str) for f in frames)
    assert not any(f.startswith("/") and "-packages/" in f for f in frames)


def test_small_budgets_are_kept_and_say_how_to_get_more(client):
    for name, args in (("events", {"path": OOM, "limit": 1000}), ("top_allocations", {"path": OOM, "limit": 1000}),
                       ("reference_cycles", {"path": CYCLES}), ("snapshot_info", {"path": OOM})):
        result = client.call(name, {**args, "max_chars": 600})
        data = data_of(result, budget=600)
        assert data["truncated"] and data["omitted"] and "max_chars" in data["more"], (name, data)


def test_list_snapshots_lists_the_samples_newest_first(client):
    data = data_of(client.call("list_snapshots", {"limit": 1000, "max_chars": 10**6}), budget=10**6)
    under = data.get("paths_under", "")
    paths = [under + f["path"] for f in data["files"]]
    assert str(Path(OOM).resolve()) in paths and data["total"] == len(paths)
    times = [f["modified"] for f in data["files"]]
    assert times == sorted(times, reverse=True)
    page = data_of(client.call("list_snapshots", {"limit": 2, "contains": "oom"}))
    assert len(page["files"]) <= 2 and all("oom" in f["path"].rsplit("/", 1)[-1] for f in page["files"])
    assert "outside the folders" in error_text(client.call("list_snapshots", {"folder": "/etc"}))


def test_cancelling_a_call_frees_the_server_within_a_second(client):
    if not BIG.exists():
        pytest.skip("the 1M-event snapshot is not available")
    data_of(client.call("snapshot_info", {"path": str(BIG)}))  # the load, before the call cancelled

    async def cancelled_then_next() -> float:
        slow = asyncio.ensure_future(client.session.call_tool("reference_cycles", {"path": str(BIG), "depth": 7}))
        await asyncio.sleep(1.0)
        slow.cancel()  # the SDK tells the server (notifications/cancelled)
        started = time.perf_counter()
        result = await client.session.call_tool("snapshot_info", {"path": OOM})
        assert not result.is_error
        return time.perf_counter() - started

    assert client.run(cancelled_then_next()) < 1.0


def seconds_to_exit_after_the_client_leaves(call: dict | None, busy_for: float) -> float:
    """Start a server, maybe send it ``call``, let it work ``busy_for`` seconds, close its
    stdin as a killed client would, and time its exit."""
    server = subprocess.Popen([sys.executable, "-m", "memtui", "mcp", "--root", str(SHARED), "--no-cache"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ] + ([{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}] if call else [])
    for message in messages:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        if message.get("id") == 1:
            server.stdout.readline()
    time.sleep(busy_for)
    server.stdin.close()
    started = time.perf_counter()
    try:
        server.wait(timeout=30)
    finally:
        server.kill()
    return time.perf_counter() - started


# About 12 s: two servers of their own, one idle and one busy with the million events when
# its client leaves.
@pytest.mark.slow
def test_a_client_that_goes_away_leaves_no_server_behind():
    if not BIG.exists():
        pytest.skip("the 1M-event snapshot is not available")
    idle = seconds_to_exit_after_the_client_leaves(None, 0.5)  # the SDK's own shutdown, on this machine
    busy = seconds_to_exit_after_the_client_leaves(
        {"name": "reference_cycles", "arguments": {"path": str(BIG)}}, 4.0)
    assert busy < idle + 1.0, (busy, idle)


def test_analyses_are_remembered_per_snapshot():
    from memtui.mcp import tools
    from memtui.mcp.store import SnapshotStore
    from memtui.services.catalog import spec

    store = SnapshotStore([str(SAMPLES)], cache=None)
    first = tools.answer(store, spec("cycles"), {"path": CYCLES, "limit": 1})
    again = tools.answer(store, spec("cycles"), {"path": CYCLES, "limit": 5})  # another page of the same analysis
    assert store.computations == 1 and first.data["cycles_suspected"] == again.data["cycles_suspected"]
    tools.answer(store, spec("cycles"), {"path": CYCLES, "depth": 2})
    assert store.computations == 2


# About 5 s: three loads of a file that inflates to 200,000 small objects.
@pytest.mark.slow
def test_a_refused_load_gives_its_memory_back(tmp_path):
    # Small dicts under "segments": refused only once built, and glibc keeps
    # the pages of so many small objects unless asked to give them back.
    body = b"".join(b"}X\x01\x00\x00\x00xJ" + i.to_bytes(4, "little") + b"s" for i in range(200_000))
    (tmp_path / "bomb.pickle.xz").write_bytes(lzma.compress(b"\x80\x04}X\x08\x00\x00\x00segments(" + body + b"ls.",
                                                            preset=1))
    code = f"""
from memtui.mcp.store import SnapshotStore
from memtui.errors import MemtuiError
def rss(): return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024
store = SnapshotStore([{str(tmp_path)!r}], None)
before = rss()
for _ in range(3):
    try:
        store.open("bomb.pickle.xz")
    except MemtuiError:
        pass
print(rss() - before)
"""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc to read the resident size from")
    grown = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                               timeout=120, check=True).stdout)
    assert grown < 20, f"{grown} MiB still held after three refused loads"


def default_arguments(tool, path: str, address_n: str) -> dict:
    """Only what ``tool`` requires, as an agent's first call would give."""
    required = set(tool.input_schema.get("required", []))
    args = {"path": path} if "path" in required else {}
    if "address_n" in required:
        args["address_n"] = address_n
    if {"a", "b"} <= required:
        args.update(a=path, b=path)
    if "inputs" in required:
        args["inputs"] = [path, path]
    return args


# About 22 s on 2 cores: each tool's first answer on a million events runs every analysis at
# that size (the reference cycles and the what-if replay most of it), and an answer of 1.8
# million characters was only ever seen at that size.
@pytest.mark.slow
@pytest.mark.shared
def test_every_default_answer_on_a_million_events_fits_its_budget(client):
    if not BIG.exists():
        pytest.skip("the 1M-event snapshot is not available")
    tools = client.run(client.session.list_tools()).tools
    address_n = data_of(client.call("top_allocations", {"path": str(BIG), "limit": 1}))["rows"][0]["address_n"]
    sizes = {}
    for tool in tools:
        result = client.call(tool.name, default_arguments(tool, str(BIG), address_n), timeout=120)
        assert not result.is_error, (tool.name, result.content[0].text)
        sizes[tool.name] = len(result.content[0].text)
        data_of(result)  # one item, JSON, within 8,000 characters
    assert len(sizes) == len(tools) and max(sizes.values()) <= 8000, sizes


def test_compare_runs_is_the_two_peaks_and_their_diff_in_one_call(client):
    a, b = str(SAMPLES / "train_steps_3_6.pickle.xz"), str(SAMPLES / "train_linear_adam.pickle.xz")
    data = data_of(client.call("compare_runs", {"a": a, "b": b, "top": 1000, "max_chars": 10**6}), budget=10**6)
    peaks = [data_of(client.call("memory_breakdown", {"path": p, "max_chars": 10**6}), budget=10**6) for p in (a, b)]
    for side, peak in zip((data["a"], data["b"]), peaks):
        assert side["peak_allocated"] == peak["allocated"] and side["peak_event"] == peak["at"]["event"]
        assert side["categories"] == {k: v for k, v in peak["categories"].items() if v}
    assert data["delta_peak_allocated"] == peaks[1]["allocated"] - peaks[0]["allocated"]
    diff = data_of(client.call("diff_snapshots", {"a": a, "b": b, "at_a": data["a"]["peak_event"],
                                                  "at_b": data["b"]["peak_event"], "top": 1000,
                                                  "max_chars": 10**6}), budget=10**6)
    assert [s["site"] for s in data["sites"]] == [s["site"] for s in diff["sites"]]
    assert "peak allocated: A" in data["summary"][0]


def test_memory_by_annotation_measures_each_stage_on_the_allocated_curve(client):
    from memtui.analysis.categories import annotation_spans
    from memtui.analysis.live import allocated_curve
    from memtui.open import open_snapshot

    path = SAMPLES / "expandable_segments.pickle.xz"
    data = data_of(client.call("memory_by_annotation", {"path": str(path)}))
    stages = {s["name"]: s for s in data["stages"]}
    assert {"memtui.step", "Optimizer.step#AdamW.step"} <= set(stages)
    rises = [s["most_rise"] for s in data["stages"]]
    assert rises == sorted(rises, reverse=True)
    snapshot = open_snapshot(path, cache=None)
    dev = snapshot.devices[0]
    curve = allocated_curve(dev)
    steps = [(lo, hi) for lo, hi in annotation_spans(snapshot, dev, "memtui.step#") if lo <= hi]
    step = stages["memtui.step"]
    assert step["runs"] == len(steps)
    assert step["most_rise"] == max(int(curve[lo:hi + 1].max()) - (int(curve[lo - 1]) if lo else 0)
                                    for lo, hi in steps)
    assert step["peak"] == max(int(curve[lo:hi + 1].max()) for lo, hi in steps)
    bare = str(SAMPLES / "format" / "pool_ids.pickle.xz")  # recorded without annotations
    assert "no annotations" in error_text(client.call("memory_by_annotation", {"path": bare}))
