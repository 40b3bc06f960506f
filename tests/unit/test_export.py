"""msgpack export, reopening it, and converting back to torch's pickle or JSON."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest

from memtui.cli import main
from memtui.export.convert import convert_file
from memtui.export.writer import export_snapshot
from memtui.open import open_snapshot
from memtui.query import compile_filter
from memtui.services.info import summarize
from tests.conftest import SHARED, sample_files, shared_files
from tests.fixtures.opened import cached
from tests.fixtures.synthetic import synthetic_snapshot


def round_trip_files() -> list:
    # The million-event file takes ~20 s to round-trip: a slow case (pytest -m slow).
    return [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name.startswith("big_trace") else [])
            for p in sample_files() + shared_files()]


@pytest.fixture(scope="module")
def synthetic_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "synthetic.pickle"
    path.write_bytes(pickle.dumps(synthetic_snapshot(), protocol=4))
    return path


def comparable(summary: dict) -> dict:
    """``info --json`` without what necessarily differs between a file and its copy."""
    return {k: v for k, v in summary.items() if k not in ("file", "file_size", "export_header")}


def read_objects(path) -> list[dict]:
    with open(path, "rb") as fh:
        return list(msgpack.Unpacker(fh, raw=False, strict_map_key=False))


def exported_indices(path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for obj in read_objects(path)[1:]:
        if obj.get("kind") == "events":
            out.setdefault(obj["device"], []).extend(obj["index"])
    return out


def check_round_trip(source, tmp_path):
    original = cached(str(source))  # opened once per process (tests/fixtures/opened.py): an export only reads it
    exported = tmp_path / "all.msgpack"
    export_snapshot(original, exported)
    reopened = open_snapshot(exported)
    assert reopened.header["filter"] == "" and reopened.header["source_name"] == os.path.basename(source)
    converted = tmp_path / "back.pickle"
    convert_file(str(exported), str(converted))
    expected = comparable(summarize(original))
    assert comparable(summarize(reopened)) == expected
    assert comparable(summarize(open_snapshot(converted))) == expected


@pytest.mark.parametrize("source", round_trip_files())
def test_round_trip_real_files(source, tmp_path):
    check_round_trip(source, tmp_path)


def test_round_trip_synthetic(synthetic_path, tmp_path):
    check_round_trip(synthetic_path, tmp_path)


FILTERS = ["", "action:alloc size>=1MiB", "live", "leaked or action:oom", "file:train.py -freed", "stream:7",
           "event:10..200 not action:free", "time:1s..3s", "pool:1", "ctx:compiled meta:epoch=2"]


@pytest.mark.parametrize("text", FILTERS)
def test_filtered_export_holds_exactly_the_filtered_rows(synthetic_path, tmp_path, text):
    snapshot = open_snapshot(synthetic_path)
    out = tmp_path / "f.msgpack"
    result = export_snapshot(snapshot, out, text)
    compiled = compile_filter(text)
    got = exported_indices(out)
    for d in range(len(snapshot.devices)):
        assert got.get(d, []) == compiled.indices(snapshot, d).tolist()
    assert result.events == sum(len(v) for v in got.values())

    # Reopened, each row is the same event: action, address, size, stream, time and stack.
    reopened = open_snapshot(out)
    assert reopened.header["filter"] == text
    for d in range(len(snapshot.devices)):
        rows = np.array(got.get(d, []), np.int64)
        old, new = snapshot.devices[d].trace, reopened.devices[d].trace
        assert len(new) == len(rows)
        names = snapshot.actions.names
        assert [names[a] for a in old.action[rows]] == [reopened.actions.names[a] for a in new.action]
        for column in ("addr", "size", "stream", "device_free"):
            assert np.array_equal(getattr(old, column)[rows], getattr(new, column)), column
        assert np.array_equal(old.time_us[rows], new.time_us, equal_nan=True)
        old_stacks = [snapshot.stacks.top_frame_text(int(s)) for s in old.stack[rows]]
        assert old_stacks == [reopened.stacks.top_frame_text(int(s)) for s in new.stack]


def test_filtered_export_of_a_real_file(tmp_path):
    source = SHARED / "multistream.pickle"
    if not source.exists():
        pytest.skip("multistream.pickle not available")
    snapshot = open_snapshot(source)
    out = tmp_path / "f.msgpack"
    export_snapshot(snapshot, out, "action:alloc live", device=0)
    assert exported_indices(out) == {0: compile_filter("action:alloc live").indices(snapshot, 0).tolist()}


def test_header(synthetic_path, tmp_path):
    snapshot = open_snapshot(synthetic_path)
    out = tmp_path / "h.msgpack"
    export_snapshot(snapshot, out, "size>1KiB", device=1)
    header = read_objects(out)[0]
    assert list(header)[0] == "format" and header["format"] == "memtui" and header["version"] == 1
    assert header["source_name"] == "synthetic.pickle"
    assert header["source_size"] == synthetic_path.stat().st_size
    assert header["source_sha256"] == hashlib.sha256(synthetic_path.read_bytes()).hexdigest()
    assert header["filter"] == "size>1KiB" and header["device"] == 1 and header["devices"] == [1]
    assert header["memtui_version"] and header["created"].endswith("+00:00")
    reopened = open_snapshot(out)
    # Device numbers survive: device 1 stays device 1.
    assert len(reopened.devices) == 2 and len(reopened.devices[0].trace) == 0
    assert len(reopened.devices[1].segments) == len(snapshot.devices[1].segments)


def test_tables_hold_only_what_rows_use(synthetic_path, tmp_path):
    snapshot = open_snapshot(synthetic_path)
    out = tmp_path / "t.msgpack"
    export_snapshot(snapshot, out, "func:step action:alloc")
    objects = read_objects(out)
    tables = next(o for o in objects if o.get("kind") == "tables")
    used = {s for o in objects if o.get("kind") in ("events",) for s in o["stack"]}
    for o in objects:
        if o.get("kind") == "device":
            used |= set(o["segments"]["stack"]) | set(o["blocks"]["stack"])
    used.discard(-1)
    assert used == set(range(len(tables["stacks"])))
    assert {f for stack in tables["stacks"] for f in stack} == set(range(len(tables["frames"])))


def test_no_stacks(synthetic_path, tmp_path):
    out = tmp_path / "n.msgpack"
    assert main(["export", str(synthetic_path), "--no-stacks", "-o", str(out)]) == 0
    tables = next(o for o in read_objects(out) if o.get("kind") == "tables")
    assert tables["stacks"] == [] and tables["frames"] == []
    reopened = open_snapshot(out)
    assert (reopened.devices[0].trace.stack == -1).all()


def test_cli_export_info_convert(synthetic_path, tmp_path, capsys):
    out = tmp_path / "c.msgpack"
    assert main(["export", str(synthetic_path), "--filter", "action:alloc", "--device", "0", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["info", "--json", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["export_header"]["filter"] == "action:alloc"
    assert info["devices"][0]["trace"]["actions"] == {"alloc": info["devices"][0]["trace"]["entries"]}
    # A filtered trace would replay into impossible states in memory_viz: refused, nothing written.
    back = tmp_path / "c.json"
    assert main(["convert", str(out), "-o", str(back)]) == 2
    assert "filtered export" in capsys.readouterr().err and not back.exists()
    whole = tmp_path / "whole.msgpack"
    assert main(["export", str(synthetic_path), "-o", str(whole)]) == 0
    capsys.readouterr()
    assert main(["convert", str(whole), "-o", str(back)]) == 0
    data = json.loads(back.read_text())
    assert set(data) == {"segments", "device_traces", "allocator_settings", "external_annotations"}
    assert len(data["device_traces"][0]) == len(open_snapshot(synthetic_path, cache=None).devices[0].trace)


def test_cli_refuses_bad_filter_and_device(synthetic_path, tmp_path, capsys):
    out = tmp_path / "x.msgpack"
    assert main(["export", str(synthetic_path), "--filter", "size>", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtui: invalid filter at column 6: expected a size") and "\n" == err[-1]
    assert main(["export", str(synthetic_path), "--device", "5", "-o", str(out)]) == 2
    assert "no device 5" in capsys.readouterr().err
    assert main(["convert", str(synthetic_path), "-o", str(tmp_path / "x.txt")]) == 2
    assert ".pickle" in capsys.readouterr().err
    assert not out.exists()


def test_converted_pickle_is_torch_protocol_4(synthetic_path, tmp_path):
    out = tmp_path / "p.pickle"
    convert_file(str(synthetic_path), str(out))
    data = out.read_bytes()
    assert data[:2] == b"\x80\x04"
    obj = pickle.loads(data)
    assert "memtui_header" not in obj and obj["segments"][0]["segment_pool_id"] == (0, 0)


def test_memory_viz_stats_reads_converted_pickle(synthetic_path, tmp_path):
    # Looked for, not imported: torch takes seconds to import, and only the subprocess needs it.
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    exported = tmp_path / "v.msgpack"
    export_snapshot(open_snapshot(synthetic_path), exported, "")  # a filtered export is refused (convert.py)
    out = tmp_path / "v.pickle"
    convert_file(str(exported), str(out))
    done = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "segments" in done.stdout.lower() or "total" in done.stdout.lower()


def test_the_documented_python_example_runs(synthetic_path, tmp_path, monkeypatch, capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "export-format.md").read_text()
    section = doc.split("## Reading it in Python with only msgpack", 1)[1].split("\n\n", 1)[1]
    lines = []
    for line in section.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    code = "\n".join(lines).strip()
    assert len(code.splitlines()) <= 10 and "import msgpack" in code and "memtui" not in code.replace('"memtui"', "")
    monkeypatch.chdir(tmp_path)
    export_snapshot(open_snapshot(synthetic_path), tmp_path / "out.msgpack", "action:oom")
    exec(compile(code, "export-format.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "synthetic.pickle filtered by 'action:oom'"
    assert len(out) > 1 and all(" oom " in line for line in out[1:])
