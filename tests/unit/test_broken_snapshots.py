"""Structurally wrong snapshots: loaded with warnings ``memtui check`` lists, or refused in one line.

One case per kind of damage: wrong types in fields, negative sizes, frees of unknown
addresses, blocks outside their segment, duplicate addresses, NaN/None times, lone
surrogates and control characters in names, 10,000-frame stacks. Whatever the file holds,
no command prints a control character: escape sequences in names, annotations, actions,
states, settings and file names come out escaped.
"""

from __future__ import annotations

import json
import math
import pickle

import pytest

from memtui.cli import main
from memtui.errors import SnapshotError
from memtui.open import open_snapshot
from tests.fixtures import variants

MIB = 1 << 20
SEG = 0x7F0000000000


def check_json(path, capsys) -> list[dict]:
    assert main(["check", "--json", "--no-cache", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def write(tmp_path, snap: dict, name: str = "broken.pickle"):
    path = tmp_path / name
    path.write_bytes(pickle.dumps(snap, protocol=4))
    return path


def entry(action, addr, size, t=1000, frames=None, **extra):
    return dict({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                 "frames": frames if frames is not None else [variants.FRAME_A]}, **extra)


def wrong_types(snap):
    snap["device_traces"][0][1]["size"] = "big"
    snap["device_traces"][0][2]["stream"] = [1, 2]
    snap["device_traces"][0][3]["compile_context"] = {"not": "a string"}
    snap["segments"][0]["blocks"][1]["size"] = None
    snap["segments"][0]["segment_pool_id"] = [[1], {}]


def negative_sizes(snap):
    snap["device_traces"][0][1]["size"] = -4096
    snap["segments"][0]["blocks"][1]["size"] = -MIB


def unknown_frees(snap):
    snap["device_traces"][0].insert(0, entry("free_completed", SEG + 64 * MIB, MIB, 999))


def blocks_outside(snap):
    snap["segments"][0]["blocks"][1]["address"] = SEG + 10 * MIB


def duplicate_addresses(snap):
    snap["segments"][0]["blocks"][1]["address"] = SEG
    snap["device_traces"][0].append(entry("alloc", SEG, MIB, 1005))


def bad_times(snap):
    snap["device_traces"][0][1]["time_us"] = float("nan")
    snap["device_traces"][0][2]["time_us"] = None
    del snap["device_traces"][0][3]["time_us"]


def odd_characters(snap):
    snap["device_traces"][0][1]["frames"] = [{"filename": "\udcff\ud800.py", "line": 1, "name": "\x1b[2Jf\x07"}]


CASES = {
    "wrong types": (wrong_types, "usable integer"),
    "negative sizes": (negative_sizes, "negative size"),
    "frees of unknown addresses": (unknown_frees, "frees whose alloc is not in the trace"),
    "blocks outside their segment": (blocks_outside, "outside their segment"),
    "duplicate addresses": (duplicate_addresses, "duplicate block addresses"),
    "NaN and None times": (bad_times, "have no time"),
    "surrogates and control characters": (odd_characters, "control or invalid characters"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_loaded_with_the_finding_listed(tmp_path, capsys, case):
    damage, finding = CASES[case]
    snap = variants.modern()
    damage(snap)
    path = write(tmp_path, snap)
    findings = check_json(path, capsys)
    assert any(finding in f["message"] for f in findings), findings
    for streaming in (True, False):  # the two decoders agree on what they accept
        open_snapshot(path, streaming=streaming, cache=None)


def test_ten_thousand_frame_stacks(tmp_path, capsys):
    deep = [{"filename": f"layer{i}.py", "line": i, "name": f"f{i}"} for i in range(10_000)]
    snap = variants.modern()
    snap["device_traces"][0][1]["frames"] = deep
    path = write(tmp_path, snap)
    model = open_snapshot(path, cache=None)
    assert len(model.stacks.frame_ids(int(model.devices[0].trace.stack[1]))) == 10_000
    address_n = model.devices[0].event_address_n(1)
    assert main(["stack", "--no-cache", "--all-frames", str(path), address_n]) == 0
    assert capsys.readouterr().out.count("layer") == 10_000


@pytest.mark.parametrize("data, fragment", [
    (b"\x80\x04\x8c\x02\xff\xfe.", "not a readable pickle"),  # a string that is not UTF-8
    (b"\x80\x02U\x02\xff\xfe.", "not a readable pickle"),  # protocol 2 strings are ASCII
    (pickle.dumps({"segments": [{"address": 1, "total_size": 2, "blocks": 5}]}), "blocks are a int"),
    (pickle.dumps({"segments": {"a": 1}}), "'segments' is a dict"),
    (pickle.dumps({"device_traces": [[1, 2]]}), "holds int, not entries"),
])
def test_refused_in_one_line(tmp_path, capsys, data, fragment):
    path = tmp_path / "bad.pickle"
    path.write_bytes(data)
    assert main(["info", "--no-cache", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err


EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


def hostile_text_snapshot() -> dict:
    """Escape sequences in every string a command may print."""
    frames = [{"filename": f"{EVIL}train.py", "line": 1, "name": f"{EVIL}forward"}]
    snap = variants.modern()
    for e in snap["device_traces"][0]:
        e["frames"] = frames
        e["compile_context"] = EVIL
        e["user_metadata"] = EVIL
    snap["device_traces"][0].append(entry(f"{EVIL}mystery", SEG, 0, 1010, frames))
    snap["device_traces"][0].append(entry("oom", 0, 64 * MIB, 1011, frames, device_free=MIB))
    snap["segments"][0]["blocks"][0]["frames"] = frames
    snap["segments"][0]["blocks"][1]["state"] = f"{EVIL}state"
    snap["segments"][0]["segment_type"] = EVIL
    snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": EVIL, EVIL: EVIL, "max_split_size": 1 << 20_000}
    snap["external_annotations"] = [{"stage": "START", "name": EVIL, "device": 0, "time_us": 1001},
                                    {"stage": EVIL, "name": EVIL, "device": 0, "time_us": 1003}]
    return snap


@pytest.mark.parametrize("command", [["info"], ["info", "--json"], ["check"], ["check", "--json"], ["events"],
                                     ["events", "--json"], ["top"], ["oom"], ["leaks"], ["cycles"], ["stack"]])
def test_no_command_prints_a_control_character(tmp_path, capsys, command):
    path = write(tmp_path, hostile_text_snapshot(), name=f"{EVIL}snap.pickle")
    args = [*command, "--no-cache", str(path)]
    if command == ["stack"]:
        args.append(open_snapshot(path, cache=None).devices[0].event_address_n(1))
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    for text in (out, err):
        assert all(ch == "\n" or ch.isprintable() for ch in text), repr(text[:300])
    if "--json" in command:
        json.loads(out)


def test_an_unprintable_file_name_in_an_error(tmp_path, capsys):
    assert main(["info", str(tmp_path / f"{EVIL}missing.pickle")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;pwned" in err


def test_export_header_strings_are_escaped(tmp_path):
    from memtui.export.writer import export_snapshot

    source = write(tmp_path, hostile_text_snapshot(), name=f"{EVIL}snap.pickle")
    out = tmp_path / "hostile.msgpack"
    export_snapshot(open_snapshot(source, cache=None), out, "", selection=EVIL)
    reopened = open_snapshot(out, cache=None)
    for value in (reopened.header["source_name"], reopened.header["selection"]):
        assert value.isprintable() and "\\x1b" in value
    assert all(text.isprintable() for text in reopened.actions.names + reopened.strings.values)


def test_values_no_number_fits(tmp_path, capsys):
    snap = variants.modern()
    snap["device_traces"][0][1]["time_us"] = 1 << 20_000
    snap["device_traces"][0][2]["addr"] = 1 << 20_000
    snap["segments"][0]["blocks"][1]["address"] = -(1 << 20_000)
    snap["external_annotations"] = [{"stage": "START", "name": "a", "device": 0, "time_us": 1 << 20_000}]
    path = write(tmp_path, snap)
    findings = check_json(path, capsys)
    assert any("usable integer" in f["message"] for f in findings)
    model = open_snapshot(path, cache=None)
    assert math.isnan(model.annotations[0].time_us)
    assert main(["events", "--json", "--no-cache", str(path)]) == 0
    json.loads(capsys.readouterr().out)


def test_device_traces_of_the_wrong_shape(tmp_path):
    path = write(tmp_path, {"segments": [], "device_traces": "nope"})
    with pytest.raises(SnapshotError, match="must be a list of lists"):
        open_snapshot(path, cache=None)


@pytest.mark.parametrize("settings", [{f"k{i}": i for i in range(20_000)}, ["not", "a", "dict"]])
def test_settings_past_what_is_walked_or_not_a_dict_stay_a_dict(tmp_path, capsys, settings):
    path = tmp_path / "settings.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]], "allocator_settings": settings}))
    snapshot = open_snapshot(path, cache=None)
    assert isinstance(snapshot.allocator_settings, dict)
    for command in (["info"], ["info", "--json"], ["whatif"]):
        assert main([*command, "--no-cache", str(path)]) == 0
    capsys.readouterr()
