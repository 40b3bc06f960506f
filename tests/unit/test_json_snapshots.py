"""Snapshots written as JSON: memtui's own ``convert -o x.json`` output and a plain
``json.dump`` of the snapshot dict open to the same model as the pickle; the format is
told by content, not by name; hostile JSON gets one line and exit status 2."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import pickle
import random
import subprocess
import sys
import time

import pytest

from memtui.cli import main
from memtui.errors import SnapshotError
from memtui.export.convert import convert_file
from memtui.load.limits import MAX_JSON_DEPTH, JsonStructure
from memtui.load.read import read_snapshot
from memtui.load.safe_pickle import safe_load
from memtui.load.source import inspect_source, open_decompressed
from memtui.model.snapshot import build_model
from memtui.open import open_snapshot
from tests.conftest import ROOT, sample_files, shared_params
from tests.fixtures import variants
from tests.fixtures.model_equality import assert_same_model

SAMPLES = [pytest.param(p, id=p.name) for p in sample_files()]
COMPRESSORS = {"gzip": gzip.compress, "xz": lzma.compress, "bz2": bz2.compress}


def info_json(path, capsys) -> dict:
    assert main(["info", "--json", "--no-cache", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    return {k: v for k, v in summary.items() if k not in ("file", "file_size")}


def model_of(raw: dict):
    return build_model(raw, "same", 1)


def raw_pickle_dict(path) -> object:
    """The file's content as the safe loader reads it, before normalization."""
    with open_decompressed(inspect_source(path)) as stream:
        return safe_load(stream, os.path.basename(path))


# -- what memtui writes, it reads ----------------------------------------------------------------

@pytest.mark.parametrize("source", SAMPLES)
def test_converted_json_reopens_as_the_pickle(source, tmp_path, capsys):
    target = tmp_path / "converted.json"
    assert main(["convert", str(source), "-o", str(target)]) == 0
    capsys.readouterr()
    assert target.read_bytes()[:1] == b"{"
    assert info_json(target, capsys) == info_json(source, capsys)
    source_raw = read_snapshot(source)  # read once: the pickle's shape check is the slow part
    assert _entry_pools_as_tuples(read_snapshot(target)) == source_raw
    assert_same_model(model_of(read_snapshot(target)), model_of(source_raw))


def _entry_pools_as_tuples(raw: dict) -> dict:
    """JSON has no tuples: an entry's ``pool_id`` reads back as a list (the model takes both alike)."""
    for trace in raw["device_traces"]:
        for entry in trace:
            if isinstance(entry.get("pool_id"), list):
                entry["pool_id"] = tuple(entry["pool_id"])
    return raw


@pytest.mark.parametrize("source", SAMPLES[:3])
def test_json_through_streaming_and_plain_paths(source, tmp_path):
    target = tmp_path / "converted.json"
    convert_file(str(source), str(target))
    streamed = open_snapshot(target, streaming=True, cache=None)
    plain = open_snapshot(target, streaming=False, cache=None)
    assert_same_model(streamed, plain)


@pytest.mark.parametrize("make", [variants.modern, variants.torch20_history, variants.bare_segment_list,
                                  variants.missing_optional_keys, variants.unknown_action, variants.huge_addresses,
                                  variants.empty_traces, variants.two_devices])
def test_every_variant_as_json_is_the_same_model(make, tmp_path):
    pickled = tmp_path / "v.pickle"
    pickled.write_bytes(pickle.dumps(make(), protocol=4))
    dumped = tmp_path / "v.json"
    dumped.write_text(json.dumps(make()))
    assert read_snapshot(dumped) == read_snapshot(pickled)
    assert_same_model(model_of(read_snapshot(dumped)), model_of(read_snapshot(pickled)))


# -- a plain json.dump of a real snapshot dict ----------------------------------------------------

def check_plain_dump(source, tmp_path):
    raw = raw_pickle_dict(source)
    target = tmp_path / "dumped.json"
    with open(target, "w") as fh:
        json.dump(raw, fh)
    assert '"segment_pool_id": [' in target.read_text()[:1 << 20] or not raw.get("segments")
    assert read_snapshot(target) == read_snapshot(source)
    assert_same_model(model_of(read_snapshot(target)), model_of(read_snapshot(source)))
    return target


@pytest.mark.parametrize("source", SAMPLES[:4])
def test_plain_json_dump_of_a_sample(source, tmp_path):
    check_plain_dump(source, tmp_path)


@pytest.mark.shared
@pytest.mark.parametrize("source", shared_params("[!b]*.pickle*"))
def test_plain_json_dump_of_a_real_snapshot(source, tmp_path):
    check_plain_dump(source, tmp_path)


def test_pretty_printed_json_with_a_byte_order_mark(tmp_path):
    source = sample_files()[0]
    target = tmp_path / "pretty.json"
    target.write_bytes(b"\xef\xbb\xbf\n\n" + b" " * 5000 + json.dumps(raw_pickle_dict(source), indent=2).encode())
    assert read_snapshot(target) == read_snapshot(source)


def test_whole_float_addresses_and_pool_lists_read_like_the_pickle(tmp_path):
    # JSON written elsewhere may spell integers as floats (JavaScript does past 2**53).
    snap = variants.modern()
    for seg in snap["segments"]:
        seg["address"] = float(seg["address"])
        seg["device"] = 0.0
        seg["segment_pool_id"] = [0, 0]
        for block in seg["blocks"]:
            block["address"] = float(block["address"])
            block["size"] = float(block["size"])
    target = tmp_path / "floats.json"
    target.write_text(json.dumps(snap))
    pickled = tmp_path / "ints.pickle"
    pickled.write_bytes(pickle.dumps(variants.modern(), protocol=4))
    assert read_snapshot(target) == read_snapshot(pickled)


# -- the format is told by content -----------------------------------------------------------------

@pytest.mark.parametrize("compression", list(COMPRESSORS))
def test_compressed_json_under_any_name(compression, tmp_path):
    source = sample_files()[0]
    text = json.dumps(raw_pickle_dict(source)).encode()
    target = tmp_path / "snapshot.pickle"  # a JSON file named like a pickle
    target.write_bytes(COMPRESSORS[compression](text))
    assert read_snapshot(target) == read_snapshot(source)


def test_a_pickle_named_json_is_read_as_a_pickle(tmp_path):
    target = tmp_path / "really-a-pickle.json"
    target.write_bytes(pickle.dumps(variants.modern(), protocol=4))
    assert read_snapshot(target)["segments"]


def test_a_msgpack_export_named_json_is_read_as_an_export(tmp_path):
    from memtui.export.writer import export_snapshot

    export = tmp_path / "export.json"
    export_snapshot(open_snapshot(sample_files()[0], cache=None), export)
    assert export.read_bytes()[:1] != b"{"
    assert open_snapshot(export, cache=None).header["format"] == "memtui"


def test_json_never_starts_the_streaming_helper_process(tmp_path, monkeypatch):
    import memtui.load.stream as stream

    def refuse(*args, **kwargs):
        raise AssertionError("a helper process was started for JSON")

    monkeypatch.setattr(stream, "ProducerReader", refuse)
    monkeypatch.setattr(stream, "HELPER_PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "use_helper_process", True)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    target = tmp_path / "s.json"
    convert_file(str(sample_files()[0]), str(target))
    assert stream._use_helper_process(inspect_source(target))
    assert open_snapshot(target, cache=None).devices


# -- bad JSON: one line, exit status 2 ------------------------------------------------------------

def _deep(depth: int) -> bytes:
    return b'{"segments": [], "device_traces": [], "x": ' + b"[" * depth + b"]" * depth + b"}"


def _good() -> bytes:
    return json.dumps(variants.modern()).encode()


BAD = {
    "truncated": (_good()[:len(_good()) // 2], "truncated JSON"),
    "truncated in a string": (_good()[:_good().index(b"train.py") + 3], "truncated JSON"),
    "empty object text": (b"{", "truncated JSON"),
    "syntax error": (b'{"segments": [], oops}', "not readable JSON"),
    "trailing data": (_good() + b" {}", "not readable JSON"),
    "too deep": (_deep(MAX_JSON_DEPTH + 1), f"nested more than {MAX_JSON_DEPTH} deep"),
    "very deep": (b"[" * 5_000_000, f"nested more than {MAX_JSON_DEPTH} deep"),
    "not an object": (b"[1, 2, 3]", "not a memory snapshot"),
    "a string": (b'"segments"', "not a PyTorch memory snapshot"),
    "no snapshot keys": (b'{"hello": "world"}', "no 'segments' or 'device_traces'"),
    "segments of the wrong type": (b'{"segments": 5, "device_traces": []}', "'segments' is a int"),
    "traces of the wrong type": (b'{"segments": [], "device_traces": {"0": []}}', "must be a list of lists"),
    "entries of the wrong type": (b'{"segments": [], "device_traces": [[1, 2]]}', "holds int, not entries"),
    "a segment without an address": (b'{"segments": [{"total_size": 1}]}', "lacks 'address'"),
    "blocks of the wrong type": (b'{"segments": [{"address": 0, "total_size": 1, "blocks": 7}]}',
                                 "blocks are a int"),
    "not utf-8": (b'{"segments": [], "device_traces": [], "x": "\xff\xfe"}', "not UTF-8"),
    "an integer of 5000 digits": (b'{"segments": [], "device_traces": [], "x": ' + b"7" * 5000 + b"}",
                                  "not readable JSON"),
    "packed with empty lists": (b'{"device_traces": [[' + b"[]," * 1_200_000 + b'[]]], "segments": []}',
                                "JSON objects and arrays in"),
}


def run_cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "memtui", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_json_through_the_command_line(name, tmp_path):
    data, fragment = BAD[name]
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    result = run_cli("info", "--no-cache", path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (name, result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, (name, result.stderr)
    assert lines[0].startswith(f"memtui: {path.name}: ") and fragment in lines[0], (name, lines[0])
    assert result.stdout == "", name


@pytest.mark.parametrize("name", list(BAD))
def test_bad_json_is_refused_by_every_loader(name, tmp_path):
    data, fragment = BAD[name]
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    for load in (read_snapshot, lambda p: open_snapshot(p, streaming=True, cache=None),
                 lambda p: open_snapshot(p, streaming=False, cache=None)):
        with pytest.raises(SnapshotError) as refused:
            load(path)
        assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_a_compressed_nesting_bomb_is_refused_at_once(tmp_path):
    path = tmp_path / "bomb.json.xz"
    # 96 MiB of brackets in some 20 KB: 96 xz streams of 1 MiB each, one after the other (a
    # reader of .xz reads on into the next stream), made in 30 ms where one stream took 3 s
    path.write_bytes(lzma.compress(b"[" * (1 << 20), preset=1) * 96)
    assert path.stat().st_size < 1 << 20
    start = time.monotonic()
    result = run_cli("info", "--no-cache", path)
    assert result.returncode == 2 and f"nested more than {MAX_JSON_DEPTH} deep" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert time.monotonic() - start < 20


def test_a_nesting_bomb_is_refused_within_its_first_megabytes(tmp_path, monkeypatch):
    # The depth is measured as the text is read: the refusal comes after a few megabytes,
    # not after a 64 MiB read and a scan of 16 MiB (temporary arrays of 256 MB).
    import memtui.load.limits as limits

    path = tmp_path / "bomb.json.xz"
    path.write_bytes(lzma.compress(b"[" * (1 << 20), preset=1) * 32)  # 32 MiB, as above
    counted: list[int] = []
    real_count = limits.GuardedStream._count

    def count(self, n):
        counted.append(n)
        return real_count(self, n)

    monkeypatch.setattr(limits.GuardedStream, "_count", count)
    with pytest.raises(SnapshotError, match="nested more than"):
        read_snapshot(path)
    assert sum(counted) <= 8 << 20, sum(counted)


def test_a_compression_bomb_of_json_is_refused(tmp_path, monkeypatch):
    import memtui.load.limits as limits

    monkeypatch.setattr(limits, "INFLATION_FLOOR", 1 << 20)
    text = b'{"segments": [], "device_traces": [], "pad": "' + b"0" * (8 << 20) + b'"}'
    path = tmp_path / "bomb.json.xz"
    path.write_bytes(lzma.compress(text))
    assert len(text) > limits.MAX_INFLATION * path.stat().st_size
    with pytest.raises(SnapshotError, match="inflates to more than 1000 times its size"):
        read_snapshot(path)


@pytest.mark.parametrize("compressed", [False, True])
def test_json_text_past_the_size_limit_is_refused(tmp_path, monkeypatch, compressed):
    import memtui.load.json_snapshot as json_snapshot

    monkeypatch.setattr(json_snapshot, "MAX_JSON_BYTES", 1 << 16)
    text = json.dumps({"segments": [], "device_traces": [], "pad": "x" * (1 << 17)}).encode()
    path = tmp_path / "large.json"
    path.write_bytes(gzip.compress(text) if compressed else text)
    with pytest.raises(SnapshotError, match=r"refused: more than 64.00 KiB of JSON text"):
        read_snapshot(path)


# -- converting to JSON never writes what memtui would refuse --------------------------------------

def test_converting_values_nested_too_deeply_fails_in_one_line(tmp_path):
    snap = variants.modern()
    deep: list = []
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    snap["device_traces"][0][1]["compile_context"] = deep
    source = tmp_path / "deep.pickle"
    source.write_bytes(pickle.dumps(snap, protocol=4))
    target = tmp_path / "deep.json"
    result = run_cli("convert", source, "-o", target)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "nested more than" in result.stderr
    assert not target.exists() and os.listdir(tmp_path) == ["deep.pickle"]


def test_converting_values_nested_past_the_recursion_limit_fails_in_one_line(tmp_path):
    depth = 100_000  # the pickler (and json) would recurse past Python's limit
    snap = variants.modern()
    marker = "DEEP-VALUE-MARKER"
    snap["device_traces"][0][1]["compile_context"] = marker
    data = pickle.dumps(snap, protocol=2)
    needle = b"X" + len(marker).to_bytes(4, "little") + marker.encode()
    source = tmp_path / "deep.pickle"
    source.write_bytes(data.replace(needle, b"(" * depth + b"]" + b"l" * depth))
    for name in ("deep.json", "again.pickle"):
        result = run_cli("convert", source, "-o", tmp_path / name)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "nested" in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / name).exists()


# -- the depth scanner against a reference ----------------------------------------------------------

def _reference_depth(value, level: int = 1) -> int:
    if isinstance(value, dict):
        return max([level] + [_reference_depth(v, level + 1) for v in value.values()])
    if isinstance(value, list):
        return max([level] + [_reference_depth(v, level + 1) for v in value])
    return level - 1


def test_the_structure_scan_matches_the_parsed_depth_however_the_text_is_cut():
    rnd = random.Random(20)
    nasty = ["\\", '"', "[", "]", "{", "}", "a", "\\\\", '\\"', "é"]

    def value(level: int):
        roll = rnd.random()
        if level > 7 or roll < 0.3:
            return "".join(rnd.choice(nasty) for _ in range(rnd.randint(0, 6)))
        if roll < 0.65:
            return [value(level + 1) for _ in range(rnd.randint(0, 3))]
        return {value(99): value(level + 1) for _ in range(rnd.randint(0, 3))}

    for _ in range(2000):
        obj = value(0)
        text = json.dumps(obj, ensure_ascii=rnd.random() < 0.5).encode()
        structure = JsonStructure("x")
        cuts = sorted(rnd.sample(range(len(text) + 1), min(len(text) + 1, rnd.randint(0, 6))))
        start = 0
        for cut in cuts + [len(text)]:
            structure.feed(text[start:cut])
            start = cut
        structure.finish()
        assert structure.deepest == _reference_depth(obj), text
        assert structure.depth == 0


def test_the_structure_scan_is_fast_on_a_real_snapshot(tmp_path):
    text = json.dumps(raw_pickle_dict(sample_files()[0])).encode() * 20
    start = time.monotonic()
    structure = JsonStructure("x")
    structure.feed(text)
    structure.finish()
    assert structure.containers > 0
    assert time.monotonic() - start < 5
