"""``memtui mcp``: one server subprocess for the module, driven by the MCP SDK's own stdio client.

The client session lives in a background thread's event loop; each test hands it calls
and waits. Every tool is called on the bundled samples and must answer once, as JSON: a
summary, then the facts the matching ``--json`` command prints, compacted the documented
way (memtui/mcp/compact.py) and bounded; errors are tool errors with the CLI's one-line
message in the tools' terms, and the server keeps answering after each.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memtui.cli import main
from memtui.mcp.compact import compact_under
from memtui.mcp.store import SnapshotStore
from memtui.mcp.terms import translated
from memtui.query import compile_filter
from tests.conftest import ROOT, SAMPLES, SHARED

mcp = pytest.importorskip("mcp")

TOOLS = {"snapshot_info", "top_allocations", "events", "allocation_stack", "explain_oom", "leaks",
         "reference_cycles", "diff_snapshots", "compare_ranks", "what_if", "live_status", "list_snapshots",
         "compare_runs", "memory_by_annotation"}
HAS_BREAKDOWN = (ROOT / "memtui" / "services" / "breakdown.py").exists()
if HAS_BREAKDOWN:
    TOOLS.add("memory_breakdown")
OOM = str(SAMPLES / "oom_training.pickle.xz")
CYCLES = str(SAMPLES / "refcycle_sawtooth.pickle.xz")
LEAK = str(SAMPLES / "scenarios" / "leak_loss_list_py.pickle.xz")
TOP_LEVEL_SAMPLES = sorted(str(p) for p in SAMPLES.glob("*.pickle.xz"))


class Client:
    """A ClientSession to ``memtui mcp`` kept open in a thread; ``call`` is synchronous."""

    def __init__(self, args: list[str]) -> None:
        self.params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memtui", "mcp", *args],
                                                cwd=str(ROOT))
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._hold(),), daemon=True)
        self.thread.start()
        if not self.ready.wait(60) or self.error:
            raise RuntimeError(f"server did not start: {self.error!r}")

    async def _hold(self) -> None:
        self.stop = asyncio.Event()
        try:
            with open(os.devnull, "w") as errlog:
                async with mcp.stdio_client(self.params, errlog=errlog) as (read, write):
                    async with mcp.ClientSession(read, write) as session:
                        await session.initialize()
                        self.session = session
                        self.ready.set()
                        await self.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by __init__
            self.error = exc
            self.ready.set()

    def run(self, coroutine, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, name: str, arguments: dict, progress=None, timeout: float = 60):
        return self.run(self.session.call_tool(name, arguments, progress_callback=progress), timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A folder the server may not read, holding a perfectly good snapshot."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "good.pickle.xz").write_bytes(Path(OOM).read_bytes())
    return folder


@pytest.fixture(scope="module")
def extra_root(tmp_path_factory, outside) -> Path:
    """A second root: a hostile pickle, a link leading out of the roots, one leading into the samples."""
    folder = tmp_path_factory.mktemp("root")
    (folder / "hostile.pickle").write_bytes(pickle.dumps(Payload()))
    (folder / "escape.pickle.xz").symlink_to(outside / "good.pickle.xz")
    (folder / "sample.pickle.xz").symlink_to(OOM)
    (folder / "fresh.pickle.xz").write_bytes(Path(OOM).read_bytes())  # loaded by the progress test alone
    # an OOM request past 64 bits: the model reads its size as 0 and says it replaced a value
    huge = [{"action": "oom", "addr": 0, "size": 2 ** 70, "stream": 0, "time_us": 1, "device_free": 5, "frames": []}]
    (folder / "huge_request.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": [huge]}))
    return folder


@pytest.fixture(scope="module")
def client(extra_root, tmp_path_factory):
    roots = ["--root", str(SAMPLES), "--root", str(extra_root)]
    if SHARED.is_dir():
        roots += ["--root", str(SHARED)]
    c = Client([*roots, "--cache-dir", str(tmp_path_factory.mktemp("mcp-cache"))])
    yield c
    c.close()


class Payload:
    """A pickle that would run a command if loaded: the loader must refuse it by name."""

    def __reduce__(self):
        return os.system, ("echo pwned",)


def data_of(result, budget: int = 8000) -> dict:
    """The JSON of an answer: one text item (no second copy as structured content), its
    summary first, within its budget of characters."""
    assert not result.is_error, result.content[0].text
    [item] = result.content
    assert result.structured_content is None
    assert len(item.text) <= budget
    data = json.loads(item.text)
    assert list(data)[0] == "summary" and data["summary"] and all(isinstance(line, str) for line in data["summary"])
    assert isinstance(data["truncated"], bool)
    return data


def summary_of(result) -> str:
    return "\n".join(data_of(result)["summary"])


def facts(cli_value, answer: dict):
    """The command line's JSON as the tool writes it: compacted, under the answer's
    ``paths_under``, in the tools' terms."""
    return translated(compact_under(cli_value, answer.get("paths_under", "")))


def answer_facts(data: dict) -> dict:
    """An answer without what only the tool adds (summary, paths_under, truncated)."""
    return without(data, "summary", "paths_under", "truncated")


def error_of(client: Client, result) -> str:
    assert result.is_error
    [item] = result.content
    assert "\n" not in item.text
    # ... and the server still answers.
    assert data_of(client.call("snapshot_info", {"path": OOM}))["devices"]
    return item.text


def cli_json(args: list[str], capsys):
    code = main([*args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def without(data: dict, *keys: str) -> dict:
    return {k: v for k, v in data.items() if k not in keys}


def test_tools_are_listed_with_typed_arguments(client):
    tools = {t.name: t for t in client.run(client.session.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 100
        assert tool.annotations.read_only_hint
        properties = tool.input_schema["properties"]
        assert all(p.get("description") for p in properties.values())
    assert tools["events"].input_schema["required"] == ["path"]
    assert tools["events"].input_schema["properties"]["limit"]["maximum"] == 1000
    for tool in tools.values():  # every answer is bounded, and the schema is as strict as the check
        assert tool.input_schema["properties"]["max_chars"]["default"] == 8000
        assert tool.input_schema["additionalProperties"] is False
    assert tools["compare_ranks"].input_schema["properties"]["inputs"]["type"] == "array"


@pytest.mark.parametrize("path", TOP_LEVEL_SAMPLES, ids=os.path.basename)
def test_snapshot_info_is_info_json(client, path, capsys):
    data = data_of(client.call("snapshot_info", {"path": path, "max_chars": 100_000}))
    assert without(answer_facts(data), "default_device") == facts(cli_json(["info", path], capsys), data)


def test_top_allocations_pages(client, capsys):
    everything = cli_json(["top", OOM, "-n", "1000"], capsys)
    first = data_of(client.call("top_allocations", {"path": OOM, "limit": 7}))
    assert first["rows"] == facts(everything[:7], first) and first["total"] == len(everything)
    assert first["truncated"] and first["next_offset"] == 7
    rest = data_of(client.call("top_allocations", {"path": OOM, "limit": 1000, "offset": 7, "max_chars": 10**6}),
                   budget=10**6)
    assert rest["rows"] == facts(everything[7:], rest) and not rest["truncated"] and "next_offset" not in rest


@pytest.mark.parametrize("text", ["", "size>1MiB", "action:alloc leaked"])
def test_events_pages_through_the_trace(client, text, capsys):
    every = cli_json(["events", OOM, "--limit", "0"], capsys)
    rows, start, pages = [], 0, 0
    while start is not None:
        data = data_of(client.call("events", {"path": OOM, "filter": text, "start": start, "limit": 300,
                                              "max_chars": 10**6}), budget=10**6)
        assert data["rows"] == facts([every[r["index"]] for r in data["rows"]], data)
        rows += data["rows"]
        start, pages = data.get("next_start"), pages + 1
        assert data["truncated"] == (start is not None)
    from memtui.open import open_snapshot

    wanted = compile_filter(text).indices(open_snapshot(OOM), 0)
    assert [r["index"] for r in rows] == list(wanted) and data["matching"] == len(wanted)
    assert pages == max(1, -(-len(wanted) // 300))


def test_events_from_the_end(client):
    data = data_of(client.call("events", {"path": OOM, "start": -2}))
    assert [r["index"] for r in data["rows"]] == [717, 718] and not data["truncated"]


def test_allocation_stack_in_every_form(client, capsys):
    address_n = cli_json(["top", OOM, "-n", "1"], capsys)[0]["address_n"]
    wanted = cli_json(["stack", OOM, address_n], capsys)
    for spelling in (address_n, "0x" + address_n, "b" + address_n, f"b'{address_n}"):
        data = data_of(client.call("allocation_stack", {"path": OOM, "address_n": spelling}))
        assert answer_facts(data) == facts(wanted, data)
    bare = address_n.split("_")[0]
    listed = cli_json(["stack", OOM, bare], capsys)
    data = data_of(client.call("allocation_stack", {"path": OOM, "address_n": bare, "limit": 1}))
    if isinstance(listed, list):
        assert data["allocations"] == facts(listed[:1], data) and data["total"] == len(listed)
        assert data["truncated"] == (len(listed) > 1)
    else:
        assert answer_facts(data) == facts(listed, data)


def test_explain_oom_is_oom_json(client, capsys):
    result = client.call("explain_oom", {"path": OOM, "max_chars": 10**6})
    data = data_of(result, budget=10**6)
    cli = cli_json(["oom", OOM], capsys)
    assert data["ooms"] == facts(cli["ooms"], data) and data["device"] == cli["device"] and data["total"] == 1
    assert "verdict: process_cap" in summary_of(result)  # the batch doubled under a 2 GiB cap


def test_what_if_is_whatif_json(client, capsys):
    args = {"path": OOM, "conf": ["expandable_segments:True", ""]}
    result = client.call("what_if", {**args, "max_chars": 10**6})
    data = data_of(result, budget=10**6)
    wanted = cli_json(["whatif", OOM, "--conf", "expandable_segments:True", "--conf", ""], capsys)
    assert answer_facts(data) == facts(wanted, data)
    assert data["fidelity"]["exact"] and {s["settings"] for s in data["scenarios"]} == {"expandable_segments:True", ""}
    assert data["summary"][0] == data["advice"]


def test_leaks_finds_the_leaking_line(client, capsys):
    result = client.call("leaks", {"path": LEAK, "max_chars": 10**6})
    data = data_of(result, budget=10**6)
    assert answer_facts(data) == facts(cli_json(["leaks", LEAK], capsys), data)
    assert "scenarios.py:185 leak_loss_list" in summary_of(result)


def test_reference_cycles_is_cycles_json(client, capsys):
    data = data_of(client.call("reference_cycles", {"path": CYCLES, "limit": 1, "max_chars": 10**6}), budget=10**6)
    wanted = facts(cli_json(["cycles", CYCLES], capsys), data)
    assert wanted["cycles_suspected"] and data["cycles_suspected"]
    assert data["bursts"] == wanted["bursts"][:1] and data["truncated"] == (len(wanted["bursts"]) > 1)
    assert without(answer_facts(data), "omitted", "more", "bursts", "sites") == without(wanted, "bursts", "sites")


def test_diff_snapshots_is_diff_json(client, capsys):
    a, b = str(SAMPLES / "train_steps_3_6.pickle.xz"), str(SAMPLES / "train_linear_adam.pickle.xz")
    data = data_of(client.call("diff_snapshots", {"a": a, "b": b, "top": 1000, "max_chars": 10**6}), budget=10**6)
    wanted = facts(cli_json(["diff", a, b], capsys), data)
    assert data["sites"] == [s for s in wanted["sites"] if s["status"] != "same"]
    assert without(answer_facts(data), "sites") == without(wanted, "sites")
    cut = data_of(client.call("diff_snapshots", {"a": a, "b": b, "top": 2}))
    assert len(cut["sites"]) == 2 and cut["truncated"] == (len(data["sites"]) > 2)
    # a moment by its word or by its event number, as the command takes it
    by_word = data_of(client.call("diff_snapshots", {"a": OOM, "b": OOM, "at_a": "oom", "max_chars": 10**6}),
                      budget=10**6)
    oom_event = by_word["a"]["index"]
    by_number = data_of(client.call("diff_snapshots", {"a": OOM, "b": OOM, "at_a": oom_event, "max_chars": 10**6}),
                        budget=10**6)
    assert by_word["a"].pop("name").endswith(f"@ oom (event {oom_event})")
    assert by_number["a"].pop("name").endswith(f"@ event {oom_event}")
    assert by_word.pop("summary")[0].startswith(f"A: oom_training.pickle.xz device 0 @ oom (event {oom_event})")
    by_number.pop("summary")
    assert by_word == by_number
    assert oom_event == cli_json(["breakdown", OOM, "--at", "oom"], capsys)["at"]["event"]


@pytest.mark.skipif(not HAS_BREAKDOWN, reason="no breakdown command in this tree")
def test_memory_breakdown_is_breakdown_json(client, capsys):
    path = str(SAMPLES / "train_linear_adam.pickle.xz")
    result = client.call("memory_breakdown", {"path": path, "max_chars": 10**6})
    data = data_of(result, budget=10**6)
    assert answer_facts(data) == facts(cli_json(["breakdown", path], capsys), data)
    assert "optimizer_state" in summary_of(result)
    for by, at in (("site", "end"), ("category", "oom")):
        data = data_of(client.call("memory_breakdown", {"path": OOM, "by": by, "at": at, "steps": True,
                                                        "max_chars": 10**6}), budget=10**6)
        wanted = cli_json(["breakdown", OOM, "--by", by, "--at", at, "--steps"], capsys)
        assert answer_facts(data) == facts(wanted, data) and not data["truncated"]


def test_compare_ranks_is_ranks_json(client, capsys):
    folder = str(SAMPLES / "ranks")
    result = client.call("compare_ranks", {"inputs": [folder], "max_chars": 10**6})
    data = data_of(result, budget=10**6)
    wanted = cli_json(["ranks", folder], capsys)
    assert answer_facts(data) == facts(wanted, data)
    assert "2 ranks compared" in summary_of(result)


def test_loads_report_progress(client, extra_root):
    seen = []

    async def progress(value, total, message):
        seen.append(value)

    data_of(client.call("snapshot_info", {"path": str(extra_root / "fresh.pickle.xz")}, progress))
    assert seen and seen == sorted(set(seen)) and seen[-1] == 100
    seen.clear()  # a model held in memory is not loaded again
    data_of(client.call("snapshot_info", {"path": str(extra_root / "fresh.pickle.xz")}, progress))
    assert seen == []


def test_errors_are_one_line_tool_errors(client, extra_root, outside, capsys):
    missing = client.call("snapshot_info", {"path": str(SAMPLES / "nope.pickle")})
    assert error_of(client, missing).endswith("nope.pickle: no such file")
    assert data_of(client.call("snapshot_info", {"path": str(extra_root / "sample.pickle.xz")}))["devices"]
    for path in (str(outside / "good.pickle.xz"), str(extra_root / "escape.pickle.xz"), "../../etc/passwd"):
        refused = client.call("snapshot_info", {"path": path})
        assert "outside the folders this server may read" in error_of(client, refused)
    ranks = client.call("compare_ranks", {"inputs": [str(outside)]})
    assert "outside the folders" in error_of(client, ranks)

    hostile = str(extra_root / "hostile.pickle")
    assert main(["info", hostile]) == 2
    cli_line = capsys.readouterr().err.strip().removeprefix("memtui: ")
    assert error_of(client, client.call("snapshot_info", {"path": hostile})) == cli_line
    assert "refused" in cli_line or "not allowed" in cli_line or "posix.system" in cli_line

    bad = client.call("events", {"path": OOM, "filter": "size>>1"})
    assert "filter" in error_of(client, bad) and "column" in bad.content[0].text
    assert "device 5" in error_of(client, client.call("leaks", {"path": OOM, "device": 5}))
    assert "limit" in error_of(client, client.call("events", {"path": OOM, "limit": 5000}))
    assert "no such allocation" in error_of(client, client.call("allocation_stack",
                                                                {"path": OOM, "address_n": "7f0000000000_9"}))


@pytest.mark.shared
def test_a_second_question_on_a_million_events_is_quick(client):
    big = SHARED / "big_trace.pickle.xz"
    if not big.exists():
        pytest.skip(f"1M-event snapshot not available at {big}")
    first = data_of(client.call("snapshot_info", {"path": str(big)}))
    assert first["devices"][0]["trace"]["entries"] == 1_000_000
    started = time.perf_counter()
    data_of(client.call("events", {"path": str(big), "filter": "size>1MiB", "limit": 20}))
    assert time.perf_counter() - started < 1.0


def test_store_keeps_models_and_reloads_changed_files(tmp_path):
    (tmp_path / "a.pickle.xz").write_bytes(Path(OOM).read_bytes())
    store = SnapshotStore([str(tmp_path)], cache=None)
    first = store.open("a.pickle.xz")
    assert store.open(str(tmp_path / "a.pickle.xz")) is first and store.loads == 1
    os.utime(tmp_path / "a.pickle.xz", ns=(1, 1))
    assert store.open("a.pickle.xz") is not first and store.loads == 2 and len(store.held()) == 1


def test_the_server_never_imports_textual():
    code = ("import sys; from memtui.cli import command_modules; command_modules(); import memtui.mcp.server;"
            " sys.exit('textual' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_without_the_sdk_one_line_and_exit_2():
    code = "import sys; sys.modules['mcp'] = None; from memtui.cli import main; sys.exit(main(['mcp']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "pip install 'memtui[mcp]'" in done.stderr


def test_an_answer_from_a_file_with_replaced_values_says_so_first(client, extra_root):
    # The command line says it on stderr before its answer; a tool says it in its first line.
    path = str(extra_root / "huge_request.pickle")
    for tool in ("explain_oom", "top_allocations", "leaks"):
        data = data_of(client.call(tool, {"path": path}))
        assert data["summary"][0].startswith("note: memtui replaced values in this file (1 warning)"), tool
        assert data["notes"] == [f"memtui replaced values in this file (1 warning): figures may rest on them;"
                                 f" memtui check {path} lists them"]
    info = data_of(client.call("snapshot_info", {"path": path}))  # lists the warnings itself
    assert "notes" not in info and any(line.startswith("warning:") for line in info["summary"])
    clean = data_of(client.call("explain_oom", {"path": OOM}))
    assert "notes" not in clean and not clean["summary"][0].startswith("note:")
