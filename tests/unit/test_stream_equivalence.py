"""The streaming decoder builds exactly the model the plain loader builds."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.open import open_plain, open_snapshot, open_streaming
from tests.conftest import sample_files, shared_params
from tests.fixtures.model_equality import assert_same_model


def both(path: Path):
    return open_snapshot(path, cache=None), open_plain(path)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files()])
def test_samples_stream_like_plain(path):
    """The samples are xz files: decompressed in a stream, still the same model. A bare
    segment list (``MemPool.snapshot()``) has no trace to stream: the plain path reads it."""
    streamed = open_streaming(path)
    plain = open_plain(path)
    if streamed is None and not any(len(dev.trace) for dev in plain.devices) and not plain.traced_devices:
        streamed = open_snapshot(path, cache=None)
    assert streamed is not None, "a torch snapshot must not need the fallback"
    assert_same_model(streamed, plain)


@pytest.mark.shared
@pytest.mark.parametrize("path", shared_params("*.pickle"))
def test_shared_snapshots_stream_like_plain(path):
    streamed = open_streaming(path)
    assert streamed is not None, "a torch snapshot must not need the fallback"
    assert_same_model(streamed, open_plain(path))


@pytest.mark.shared
def test_big_trace_streams_like_plain(big_trace):
    streamed = open_streaming(big_trace)
    assert streamed is not None
    assert_same_model(streamed, open_plain(big_trace))


def test_progress_counts_file_bytes(tmp_path):
    path = sample_files()[0]
    seen = []
    open_streaming(path, lambda stage, done, total: seen.append((stage, done, total)))
    reading = [(done, total) for stage, done, total in seen if stage == "reading"]
    assert reading and reading[-1] == (path.stat().st_size, path.stat().st_size)
    assert [d for d, _ in reading] == sorted(d for d, _ in reading)
    assert seen[-1][0] == "indexing"


# -- generated snapshots ---------------------------------------------------------------

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot"]
frame = st.fixed_dictionaries({
    "filename": st.sampled_from(["train.py", "/x/torch/nn/modules/linear.py", "??"]),
    "line": st.integers(0, 5000),
    "name": st.sampled_from(["forward", "step", "main", "torch::unwind::unwind()"]),
})
OPTIONAL = ["stream", "time_us", "compile_context", "user_metadata", "frames", "device_free"]


@st.composite
def trace(draw, frames_pool):
    n = draw(st.sampled_from([0, 1, 2, 7, 1001, 2003]) if draw(st.booleans()) else st.integers(0, 30))
    dropped = draw(st.sets(st.sampled_from(OPTIONAL)))
    # torch writes a fresh 'N/A' object per entry (streamed); Python shares one (falls back)
    fresh = draw(st.booleans())
    entries = []
    lists: list[list] = []
    for i in range(n):
        entry = {"action": ACTIONS[draw(st.integers(0, len(ACTIONS) - 1)) if i < 40 else i % 5],
                 "addr": 0x7F0000000000 + 512 * (i % 13), "size": 512 * (1 + i % 4)}
        entry["stream"] = i % 2
        entry["time_us"] = 1_700_000_000_000 + i if i % 17 else float(i)
        context = "N/A" if i % 11 else "Torch-Compiled Region: 0/0"
        entry["compile_context"] = "".join([context[:1], context[1:]]) if fresh else context
        entry["user_metadata"] = "" if i % 7 else f"step {i}"
        if lists and i % 3 == 2:
            entry["frames"] = lists[-1]  # a free_completed sharing its free_requested's list
        else:
            depth = i % 4
            entry["frames"] = [frames_pool[(i + k) % len(frames_pool)] for k in range(depth)]
            lists.append(entry["frames"])
        if entry["action"] == "oom":
            entry["device_free"] = 1 << 20
        for key in dropped:
            if key != "frames" or i % 2:
                entry.pop(key, None)
        entries.append(entry)
    return entries


@st.composite
def snapshots(draw):
    frames_pool = draw(st.lists(frame, min_size=1, max_size=5))
    devices = draw(st.integers(1, 3))
    traces = [draw(trace(frames_pool)) for _ in range(devices)]
    blocks = [{"address": 0x7F0000000000, "size": 2048, "requested_size": 2000, "state": "active_allocated",
               "frames": traces[0][0]["frames"] if traces[0] and "frames" in traces[0][0] else []}]
    segment = {"device": 0, "address": 0x7F0000000000, "total_size": 1 << 21, "allocated_size": 2048,
               "active_size": 2048, "requested_size": 2000, "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": traces,
            "allocator_settings": {"expandable_segments": False},
            "external_annotations": [{"stage": "START", "name": "step", "device": 0, "time_us": 5}]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(snapshot=snapshots(), protocol=st.integers(2, 5))
def test_generated_snapshots_stream_like_plain(tmp_path, snapshot, protocol):
    path = tmp_path / f"gen{protocol}.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=protocol))
    streamed, plain = both(path)
    assert_same_model(streamed, plain)


def test_streaming_path_is_taken_for_python_pickles(tmp_path):
    """Files written by Python's pickler (as torch does) go through the sinks, not the fallback."""
    frames = [{"filename": "train.py", "line": 3, "name": "main"}]
    entries = []
    for i in range(5000):
        shared = entries[-1]["frames"] if i % 3 == 2 else [frames[0]]
        entries.append({"action": ["alloc", "free_requested", "free_completed"][i % 3],
                        "addr": 0x7F0000000000 + 512 * (i // 3), "size": 512, "stream": 0, "time_us": i,
                        # a fresh string object each time, as torch writes it
                        "compile_context": "".join(["N", "/A"]), "user_metadata": "", "frames": shared})
    snapshot = {"segments": [], "device_traces": [entries, []]}
    for protocol in (4, 5):
        path = tmp_path / f"p{protocol}.pickle"
        path.write_bytes(pickle.dumps(snapshot, protocol=protocol))
        streamed = open_streaming(path)
        assert streamed is not None
        assert_same_model(streamed, open_plain(path))


def test_helper_process_gives_the_same_model(monkeypatch):
    """Large files are rewritten in a second process; force it on for a small one."""
    import memtui.load.stream as stream

    monkeypatch.setattr(stream, "HELPER_PROCESS_MIN_BYTES", 0)
    path = sample_files()[0]
    seen = []
    streamed = open_streaming(path, lambda stage, done, total: seen.append((stage, done, total)))
    assert streamed is not None
    assert_same_model(streamed, open_plain(path))
    reading = [done for stage, done, _ in seen if stage == "reading"]
    assert reading and reading[-1] == path.stat().st_size


def test_helper_process_passes_fallbacks_on(monkeypatch, tmp_path):
    import memtui.load.stream as stream

    monkeypatch.setattr(stream, "HELPER_PROCESS_MIN_BYTES", 0)
    path = tmp_path / "list.pickle"
    path.write_bytes(pickle.dumps([{"address": 1, "total_size": 2}], protocol=4))  # no trace at all
    assert open_streaming(path) is None
    assert_same_model(open_snapshot(path, cache=None), open_plain(path))
