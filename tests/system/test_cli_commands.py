"""The headless commands on real snapshots: text and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.cli import main
from tests.conftest import SHARED, sample_files, shared_params

OOM_TRAINING = SHARED / "oom_training.pickle"


def all_real():
    params = shared_params("*.pickle")
    params += [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]
    return params


def run(args, capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("path", all_real())
def test_every_command_on_every_file(path, capsys):
    for args in (["info"], ["top", "-n", "5"], ["events", "--limit", "20"], ["events", "--start", "-3"]):
        code, out, err = run([args[0], str(path), *args[1:]], capsys)
        assert code == 0, err
        assert out.strip()
        code, out, err = run([args[0], str(path), *args[1:], "--json"], capsys)
        assert code == 0, err
        json.loads(out)


@pytest.mark.parametrize("path", all_real())
def test_stack_of_largest_live_block(path, capsys):
    code, out, _ = run(["top", str(path), "-n", "1", "--json"], capsys)
    rows = json.loads(out)
    if not rows:
        pytest.skip("no live blocks")
    address_n = rows[0]["address_n"]
    for spelling in (address_n, "0x" + address_n, "b" + address_n):
        code, out, err = run(["stack", str(path), spelling, "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["address_n"] == address_n


def require_oom_training():
    if not OOM_TRAINING.exists():
        pytest.skip("shared snapshots not available")
    return OOM_TRAINING


def test_events_rows(capsys):
    path = require_oom_training()
    code, out, _ = run(["events", str(path), "--start", "710", "--limit", "1", "--json"], capsys)
    row = json.loads(out)[0]
    assert row["index"] == 710 and row["action"] == "oom" and row["size"] == 1 << 30
    assert row["top_frame"].endswith("w_oom_training")


def test_top_text_is_human_readable(capsys):
    path = require_oom_training()
    code, out, _ = run(["top", str(path), "-n", "2"], capsys)
    assert "2.00 GiB" in out and "gen_snapshots.py:160 w_oom_training" in out


def test_stack_hides_native_frames_unless_asked(capsys):
    path = SHARED / "train_linear_adam.pickle"
    if not path.exists():
        pytest.skip("shared snapshots not available")
    _, out, _ = run(["top", str(path), "-n", "1", "--json"], capsys)
    address_n = json.loads(out)[0]["address_n"]
    _, short, _ = run(["stack", str(path), address_n], capsys)
    _, full, _ = run(["stack", str(path), address_n, "--all-frames"], capsys)
    assert "torch::unwind::unwind()" not in short
    assert "torch::unwind::unwind()" in full


def test_unknown_address_n(capsys):
    path = require_oom_training()
    code, _, err = run(["stack", str(path), "dead_7"], capsys)
    assert code == 2 and "no such allocation" in err


def test_bad_device(capsys):
    path = require_oom_training()
    code, _, err = run(["events", str(path), "--device", "9"], capsys)
    assert code == 2 and "no device 9" in err


def test_a_filter_nested_400_deep_is_one_line(capsys, tmp_path):
    path = require_oom_training()
    deep = "(" * 400 + "size>1" + ")" * 400
    code, out, err = run(["export", str(path), "--filter", deep, "-o", str(tmp_path / "x.msgpack")], capsys)
    assert code == 2 and out == "" and not list(tmp_path.iterdir())
    assert err == "memtui: invalid filter at column 101: the filter nests parentheses and 'not' more than 100 deep\n"


def test_python_dash_m_works():
    result = subprocess.run([sys.executable, "-m", "memtui", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "info" in result.stdout


def test_info_on_the_million_event_file(big_trace, capsys):
    code, out, _ = run(["info", str(big_trace), "--json"], capsys)
    assert json.loads(out)["devices"][0]["trace"]["entries"] == 1_000_000


@pytest.mark.parametrize("argv, said", [
    (["inof", "snap.pickle"], "memtui: unknown command 'inof'; did you mean info?\n"),
    (["frobnicate", "snap.pickle"], "memtui: unknown command 'frobnicate'; the commands: "),
])
def test_a_misspelt_command_is_named_in_one_line(tmp_path, monkeypatch, capsys, argv, said):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1


def test_a_missing_snapshot_before_a_flag_is_still_a_missing_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["mysnap", "--device", "1"]) == 2
    assert capsys.readouterr().err == "memtui: mysnap: no such file\n"


def test_a_page_of_events_ends_saying_where_the_next_starts(capsys):
    sample = str(Path(__file__).resolve().parents[2] / "sample_snapshots" / "oom_training.pickle.xz")
    assert main(["--no-cache", "events", sample, "--limit", "3", "--start", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "(more: --start 6)" and [line.split()[0] for line in lines[1:-1]] == ["3", "4", "5"]
    assert main(["--no-cache", "events", sample, "--start", "-2"]) == 0
    assert not capsys.readouterr().out.splitlines()[-1].startswith("(more")


@pytest.mark.parametrize("argv", [["top", "--device", "abc"], ["top", "-n", "abc"], ["whatif", "--cap"],
                                  ["--bogus"], ["info"], ["events", "--filter", "--json"], ["info", "--wrong"]])
def test_a_wrong_argument_is_one_line_naming_the_help(argv, capsys):
    sample = str(sample_files()[0])
    code = main([*argv, sample] if argv != ["info"] else argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("memtui: ") and err.count("\n") == 1 and "--help)" in err, err


def test_an_option_value_may_start_with_a_dash(capsys, tmp_path):
    # A negated filter (docs/filter.md) written as a separate word, not only as --filter=...
    sample = str(sample_files()[0])
    assert main(["events", "--json", "--filter", "-action:alloc", sample]) == 0
    apart = json.loads(capsys.readouterr().out)
    assert main(["events", "--json", "--filter=-action:alloc", sample]) == 0
    assert json.loads(capsys.readouterr().out) == apart and apart
    out = tmp_path / "x.msgpack"
    assert main(["--no-cache", "export", sample, "-f", "-action:alloc", "-o", str(out)]) == 0
    assert out.exists()
    # A negated filter whose word starts with a short option's letter (-f, -o, -h) is still a value.
    for word in ("-freed", "-optimizer", "-hook"):
        assert main(["--no-cache", "export", sample, "--filter", word, "-o", str(tmp_path / "y.msgpack"),
                     "--force"]) == 0, word


def test_a_size_of_zero_is_said_to_be_too_small_not_no_size(capsys):
    sample = str(sample_files()[0])
    for value, says in (("0", "must be more than 0 bytes, not '0'"), ("zero", "is not a size: 'zero'")):
        assert main(["--no-cache", "whatif", "--cap", value, sample]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err


@pytest.mark.parametrize("snapshot", [{"segments": [], "device_traces": []}, {"segments": []}],
                         ids=["no-trace", "segments-only-none"])
def test_a_file_that_records_nothing_is_an_empty_device_0_in_every_command(tmp_path, capsys, snapshot):
    """No trace and no segment: the model has device 0, empty, and every command answers on
    it (no internal error), in text and JSON, as on a file with an empty trace."""
    import pickle

    from memtui.open import open_snapshot

    path = tmp_path / "nothing.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    assert [d.device for d in open_snapshot(path, cache=None).devices] == [0]
    other = tmp_path / "other.pickle"
    other.write_bytes(pickle.dumps(snapshot))
    for args in (["info"], ["check"], ["oom"], ["top"], ["leaks"], ["cycles"], ["breakdown"], ["events"],
                 ["whatif"], ["diff", str(other)], ["export", "-o", str(tmp_path / "out.msgpack"), "--force"]):
        code, out, err = run([args[0], str(path), *args[1:], "--no-cache"], capsys)
        assert code == 0 and "internal error" not in err, (args, err)
        if args[0] in ("export", "check"):
            continue
        code, out, err = run([args[0], str(path), *args[1:], "--no-cache", "--json"], capsys)
        assert code == 0, (args, err)
        json.loads(out)


def test_a_segment_that_names_no_usable_device_is_said_not_silently_moved(tmp_path, capsys):
    import pickle

    from memtui.open import open_snapshot

    segment = {"device": 1_000_000, "address": 1 << 40, "total_size": 2 << 20, "allocated_size": 0,
               "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
               "blocks": [{"address": 1 << 40, "size": 2 << 20, "requested_size": 0, "state": "inactive",
                           "frames": []}]}
    path = tmp_path / "far_device.pickle"
    path.write_bytes(pickle.dumps({"segments": [segment], "device_traces": []}))
    snapshot = open_snapshot(path, cache=None)
    assert len(snapshot.devices[0].segments) == 1
    assert any("no usable device number" in w for w in snapshot.warnings)
    code, out, err = run(["check", str(path), "--no-cache"], capsys)
    assert "1 segment names no usable device number (0 to 4,095): counted under device 0" in out + err


def test_a_command_on_a_file_with_replaced_values_says_so_once(tmp_path, capsys):
    """An OOM request past 64 bits is read as 0 B: `oom` shows the figure, and one line on
    stderr says the file holds replaced values and that `check` lists them; `check` lists
    them and does not say it twice."""
    import pickle

    trace = [{"action": "oom", "addr": 0, "size": 2 ** 70, "stream": 0, "time_us": 1, "device_free": 5, "frames": []}]
    path = tmp_path / "huge_request.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}))
    code, out, err = run(["oom", str(path), "--no-cache"], capsys)
    assert code == 0 and "OOM 1 of 1" in out
    assert err.count("memtui: note: memtui replaced values in this file (1 warning)") == 1
    assert f"memtui check {path}" in err
    code, out, err = run(["check", str(path), "--no-cache"], capsys)
    assert "1 value of 'size' is not a usable integer (treated as 0)" in out + err
    assert "replaced values" not in err


def test_oom_on_a_device_without_one_names_the_device_that_has_one(tmp_path, capsys):
    from tests.conftest import SAMPLES
    from tests.fixtures.multi_device import combine

    path = combine([SAMPLES / "train_linear_adam.pickle.xz", SAMPLES / "scenarios" / "oom_capacity_py.pickle.xz"],
                   tmp_path / "two.pickle")
    code, out, _ = run(["oom", str(path), "--device", "0", "--no-cache"], capsys)
    assert code == 0
    first = out.splitlines()[0]
    assert first == "device 0: no OOM in this snapshot's trace; device 1 has one, at event 14 (--device 1)"
    code, out, _ = run(["oom", str(path), "--device", "0", "--no-cache", "--json"], capsys)
    assert json.loads(out)["oom_on_other_device"] == {"device": 1, "event": 14}
