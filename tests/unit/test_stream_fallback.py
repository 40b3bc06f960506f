"""Files that break the streaming decoder's assumptions: the same model via the plain
path, or the same clean error, never a different model."""

from __future__ import annotations

import pickle
import struct

import pytest

from memtui.errors import SnapshotError, UnsafeSnapshotError
from memtui.load.stream.sink import SINK_MODULE
from memtui.open import open_plain, open_snapshot, open_streaming
from tests.fixtures.model_equality import assert_same_model


def _entries(n: int = 3000) -> list[dict]:
    frame = {"filename": "train.py", "line": 7, "name": "step"}
    out = []
    for i in range(n):
        out.append({"action": "alloc" if i % 2 == 0 else "free_completed", "addr": 0x7F0000000000 + 512 * (i // 2),
                    "size": 512, "stream": 0, "time_us": i, "compile_context": "".join(["N", "/A"]),
                    "user_metadata": "", "frames": [frame]})
    return out


def _snapshot(**changes) -> dict:
    snapshot = {"segments": [], "device_traces": [_entries(), []], "allocator_settings": {},
                "external_annotations": []}
    snapshot.update(changes)
    return snapshot


def _same_or_same_error(path):
    try:
        want = open_plain(path)
    except SnapshotError as exc:
        with pytest.raises(type(exc)) as got:
            open_snapshot(path, cache=None)
        assert got.value.message == exc.message
        return None
    got = open_snapshot(path, cache=None)
    assert_same_model(got, want)
    return got


def _unframed(data: bytes) -> bytes:
    out, pos = [data[:2]], 2
    while pos < len(data) and data[pos] == 0x95:
        (length,) = struct.unpack("<Q", data[pos + 1:pos + 9])
        out.append(data[pos + 9:pos + 9 + length])
        pos += 9 + length
    out.append(data[pos:])
    return b"".join(out)


def test_no_frames(tmp_path):
    path = tmp_path / "unframed.pickle"
    path.write_bytes(_unframed(pickle.dumps(_snapshot(), protocol=4)))
    assert open_streaming(path) is None
    _same_or_same_error(path)


@pytest.mark.parametrize("delta", [-3, 5, 1 << 40])
def test_a_frame_length_that_lies(tmp_path, delta):
    data = bytearray(pickle.dumps(_snapshot(), protocol=4))
    assert data[2] == 0x95
    (length,) = struct.unpack("<Q", data[3:11])
    data[3:11] = struct.pack("<Q", length + delta)
    path = tmp_path / "lying.pickle"
    path.write_bytes(bytes(data))
    assert open_streaming(path) is None
    _same_or_same_error(path)


@pytest.mark.parametrize("trace", [("a", "tuple"), "a string", {"action": "alloc"}, 42])
def test_a_trace_that_is_not_a_list(tmp_path, trace):
    path = tmp_path / "odd_trace.pickle"
    path.write_bytes(pickle.dumps(_snapshot(device_traces=[trace, _entries(10)]), protocol=4))
    _same_or_same_error(path)


def test_a_pickle_naming_the_sink(tmp_path):
    """The sink's global is refused like any other: its real name is made per load."""
    for name in ("TraceSink", "trace_sink_00000000000000000000000000000000"):
        for module in (SINK_MODULE, "memtui.load.stream.sink"):
            payload = b"\x80\x04c" + f"{module}\n{name}\n".encode() + b")R."
            path = tmp_path / "sink.pickle"
            path.write_bytes(payload)
            with pytest.raises(UnsafeSnapshotError):
                open_snapshot(path, cache=None)


def test_a_dropped_entry_referred_to_again(tmp_path):
    """An entry dict also used as an annotation: its memo slot must not have been dropped."""
    snapshot = _snapshot()
    snapshot["external_annotations"] = [snapshot["device_traces"][0][5]]
    path = tmp_path / "shared_entry.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    got = _same_or_same_error(path)
    assert got is not None and len(got.annotations) == 1


def test_a_shared_compile_context_string(tmp_path):
    """One 'N/A' object for every entry (Python shares it; torch never does)."""
    entries = _entries()
    for e in entries:
        e["compile_context"] = "N/A"
    path = tmp_path / "shared_na.pickle"
    path.write_bytes(pickle.dumps(_snapshot(device_traces=[entries]), protocol=4))
    _same_or_same_error(path)


def test_unplain_values_fall_back(tmp_path):
    entries = _entries()
    entries[2500]["size"] = "large"
    entries[2600]["frames"] = ({"filename": "x.py", "line": 1, "name": "f"},)
    entries[2700]["action"] = 7
    path = tmp_path / "odd_values.pickle"
    path.write_bytes(pickle.dumps(_snapshot(device_traces=[entries]), protocol=4))
    assert open_streaming(path) is None
    got = _same_or_same_error(path)
    assert got is not None and got.warnings


def test_hostile_global_inside_the_trace_is_refused(tmp_path):
    """A global in the middle of a trace, frames intact: refused by both paths, nothing run."""
    entries = _entries(3000)
    name = "abcdefghijkl.py"
    for e in entries:
        e["frames"] = [{"filename": name, "line": 1, "name": "f"}]
    data = pickle.dumps(_snapshot(device_traces=[entries]), protocol=4)
    original = b"\x8c" + bytes([len(name)]) + name.encode()
    evil = b"cos\nsystem\n"
    evil += b"N0" * ((len(original) - len(evil)) // 2)  # same length, so every frame stays whole
    assert len(evil) == len(original) and data.count(original) == 1
    path = tmp_path / "evil.pickle"
    path.write_bytes(data.replace(original, evil))
    with pytest.raises(UnsafeSnapshotError):
        open_snapshot(path, cache=None)
    assert open_streaming(path) is None


def test_the_streaming_unpickler_refuses_other_globals():
    import io

    from memtui.load.stream.sink import StreamingUnpickler

    unpickler = StreamingUnpickler(io.BytesIO(b""), "trace_sink_0123", lambda n: None)
    with pytest.raises(UnsafeSnapshotError):
        unpickler.find_class(SINK_MODULE, "TraceSink")
    with pytest.raises(UnsafeSnapshotError):
        unpickler.find_class("memtui.load.stream.sink", "trace_sink_0123")
    with pytest.raises(UnsafeSnapshotError):
        unpickler.find_class("os", "system")
    assert unpickler.sinks == []


def test_truncated_file_gives_the_plain_error(tmp_path):
    data = pickle.dumps(_snapshot(), protocol=4)
    path = tmp_path / "truncated.pickle"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SnapshotError):
        open_snapshot(path, cache=None)
