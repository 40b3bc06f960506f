"""The compiled scanner's memo under files no pickler writes, each read by many workers (the
many_workers fixture): a slot written again between two ranges, a reference to a slot a range
fills only later, and a worker's guess of where its slots go that runs past the last slot a
pickle can name. Each gives the model the reference decoder gives, or the file is handed over
and gets the reference's error; none crashes the process."""

from __future__ import annotations

import bisect
import pickle
import pickletools
import struct

import pytest

import memtui.load.fast as fast
from memtui.load.fast import scan_snapshot
from memtui.open import open_fast, open_plain
from tests.fixtures.model_equality import assert_same_model
from tests.fixtures.scanner_files import memoized_slot, torch_like, unframed

pytestmark = pytest.mark.skipif(fast._native is None, reason="memtui._native is not built")


def reference(path):
    try:
        return open_plain(path)
    except Exception as exc:  # noqa: BLE001 - the reference's refusal is what is compared
        return exc


def test_a_slot_written_again_between_two_traces_is_read_as_written(tmp_path, many_workers):
    """The main thread reads what lies between the ranges in order: here a PUT over the slot of
    the key ``stream`` (it names ``device_free`` from then on), between two traces. The workers
    of the second trace's ranges copied the slot as it was before; their ranges are read again
    in order."""
    snap = torch_like(entries=200)
    first = [dict(entry) for entry in snap["device_traces"][0]]
    for entry in first:
        entry.pop("device_free", None)
    snap["device_traces"] = [first, [dict(entry) for entry in first]]
    data = unframed(pickle.dumps(snap, protocol=4))
    ops = list(pickletools.genops(data))
    second = next(pos for k, (op, _, pos) in enumerate(ops)
                  if op.name == "EMPTY_LIST" and ops[k - 1][0].name in ("APPENDS", "APPEND")
                  and pos > data.index(b"device_traces") + 40)
    put = b"q" + bytes([memoized_slot(data, "stream")])
    path = tmp_path / "written_again.pickle"
    path.write_bytes(data[:second] + b"\x8c\x0bdevice_free" + put + b"0" + data[second:])
    want = open_plain(path)
    second_trace = pickle.loads(path.read_bytes())["device_traces"][1]
    assert not any("stream" in e for e in second_trace) and sum("device_free" in e for e in second_trace) > 150
    assert scan_snapshot(path).parallel["merged"] > 0  # workers read ranges of it
    got = open_fast(path)
    assert got is not None
    assert_same_model(got, want)


def test_a_reference_to_a_slot_a_range_fills_later_is_refused(tmp_path, many_workers):
    """An entry's ``user_metadata`` refers to the slot of a later entry's 'N/A': the unpickler
    finds no such slot yet and refuses the file; so does the scanner, wherever the worker's
    range starts."""
    snap = torch_like(entries=200)
    snap["device_traces"] = [snap["device_traces"][0]]
    data = unframed(pickle.dumps(snap, protocol=4))
    ops = list(pickletools.genops(data))
    filled, slots = [], 0
    for op, _, _ in ops:
        filled.append(slots)
        slots += op.name == "MEMOIZE"
    later_na = [(pos, filled[k + 1]) for k, (op, arg, pos) in enumerate(ops)
                if arg == "N/A" and ops[k + 1][0].name == "MEMOIZE"]
    empty = memoized_slot(data, "")
    refs = [(pos, 2 if op.name == "BINGET" else 5) for op, arg, pos in ops
            if op.name in ("BINGET", "LONG_BINGET") and arg == empty]
    tried = 0
    for pos, length in refs[5:60:5]:
        slot = next(s for p, s in later_na if p > pos + 40)
        path = tmp_path / f"forward_{pos}.pickle"
        path.write_bytes(data[:pos] + b"j" + struct.pack("<I", slot) + data[pos + length:])
        want = reference(path)
        assert isinstance(want, Exception)  # the unpickler: no such memo slot yet
        assert open_fast(path) is None
        tried += 1
    assert tried >= 5


def test_a_guess_past_the_last_memo_slot_is_given_up_whole(tmp_path, many_workers):
    """A worker guesses where its slots go from a reference to the list the entry before made;
    a reference to slot 2**32 - 1 puts that guess past the last slot a pickle can name. The guess
    is given up before any slot is moved (it wrote past the memo and crashed the process), and
    the file gets the reference's outcome."""
    snap = torch_like(entries=600)
    snap["device_traces"] = [snap["device_traces"][0]]
    data = unframed(pickle.dumps(snap, protocol=4))
    ops = list(pickletools.genops(data))
    frames_key = memoized_slot(data, "frames")
    starts = [pos for k, (op, _, pos) in enumerate(ops)
              if op.name == "EMPTY_DICT" and ops[k + 1][0].name == "MEMOIZE" and ops[k + 2][0].name == "MARK"]
    lists = [pos for op, _, pos in ops if op.name == "EMPTY_LIST"]
    targets = []  # an entry's frames value, where the entry before made a list
    gets = ("BINGET", "LONG_BINGET")
    for k, (op, arg, _) in enumerate(ops):
        if op.name in gets and arg == frames_key and ops[k + 1][0].name in gets:
            value = ops[k + 1][2]
            entry = bisect.bisect_right(starts, value) - 1
            if entry >= 1 and any(starts[entry - 1] < at < starts[entry] for at in lists):
                targets.append((value, 2 if ops[k + 1][0].name == "BINGET" else 5))
    assert len(targets) > 10
    out, last = bytearray(), 0
    for pos, length in targets[3:]:
        out += data[last:pos] + b"j\xff\xff\xff\xff"
        last = pos + length
    path = tmp_path / "guess_past_the_end.pickle"
    path.write_bytes(bytes(out + data[last:]))
    want = reference(path)
    got = open_fast(path)  # in this process: a write past the memo would end it
    if isinstance(want, Exception):
        assert got is None
    else:
        assert got is not None
        assert_same_model(got, want)


def test_new_frames_read_between_two_traces_leave_the_later_ranges_to_their_workers(tmp_path, many_workers):
    """The main thread fills the slots it reserved for the new frames it reads between two
    ranges: slots after those the workers read, so no worker's range is read again for it."""
    snap = torch_like(entries=1500, seed=1)
    first = snap["device_traces"][0]
    second = [dict(entry) for entry in first]
    for i, entry in enumerate(second[:40]):
        entry["frames"] = [{"name": f"new{i}", "filename": "fresh.py", "line": i}]
    snap["device_traces"] = [first, second, [dict(entry) for entry in first]]
    path = tmp_path / "new_frames.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    parallel = scan_snapshot(path).parallel
    assert parallel["ranges"] > 3 and parallel["read_in_order"] == 0, parallel
    assert_same_model(open_fast(path), open_plain(path))
