"""Fuzzing the loader and model: any input gives a consistent model or a memtui error.

The strategy mirrors DESIGN.md's format and then breaks it: wrong types in fields,
negative sizes, frees of unknown addresses, blocks outside their segment, duplicate
addresses, NaN/None times, control characters in names, long stacks. Byte mutations of
a real pickle come on top. ``MEMTUI_FUZZ_EXAMPLES`` raises the number of cases for a
long run; the default keeps CI short.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.errors import MemtuiError
from memtui.model import open_snapshot
from memtui.model.checks import check_snapshot
from memtui.replay import Replayer
from tests.fixtures import variants

EXAMPLES = int(os.environ.get("MEMTUI_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])

odd_scalars = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=5),
                        st.integers(-(1 << 70), 1 << 70))
names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["forward", "\x1b[2J\x1b[31mevil", "train.py", "??", ""])
frames = st.fixed_dictionaries({"filename": names, "line": st.integers(0, 10_000) | odd_scalars, "name": names})
stacks = st.lists(frames, max_size=6) | st.just([variants.FRAME_A] * 300)
addresses = st.sampled_from([0x7F0000000000 + k * 512 for k in range(8)]) | st.integers(-5, 1 << 66)
actions = st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                           "segment_map", "segment_unmap", "oom", "snapshot", "free", "mystery"])


@st.composite
def entries(draw):
    entry = {
        "action": draw(actions | odd_scalars),
        "addr": draw(addresses | odd_scalars),
        "size": draw(st.integers(-1024, 1 << 34) | odd_scalars),
        "stream": draw(st.integers(0, 1 << 40) | odd_scalars),
        "time_us": draw(st.integers(0, 1 << 52) | st.none() | st.floats(allow_nan=True)),
    }
    if draw(st.booleans()):
        entry["frames"] = draw(stacks)
    if draw(st.booleans()):
        entry["compile_context"] = draw(names | odd_scalars)
    if entry["action"] == "oom":
        entry["device_free"] = draw(st.integers(0, 1 << 40) | odd_scalars)
    return entry


@st.composite
def blocks(draw, base):
    return {
        "address": base + draw(st.integers(-1024, 1 << 22)),
        "size": draw(st.integers(-512, 1 << 22)),
        "requested_size": draw(st.integers(0, 1 << 22)),
        "state": draw(st.sampled_from(["active_allocated", "active_pending_free", "inactive",
                                       "active_awaiting_free", "weird"])),
        "frames": draw(stacks),
    }


@st.composite
def segments(draw):
    base = draw(st.sampled_from([0x7F0000000000, 0x7F0000400000]))
    seg = {"device": draw(st.integers(0, 2)), "address": base, "total_size": draw(st.integers(0, 1 << 23)),
           "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": draw(st.booleans()),
           "blocks": draw(st.lists(blocks(base), max_size=4))}
    for key in ("allocated_size", "active_size"):
        if draw(st.booleans()):
            seg[key] = draw(st.integers(0, 1 << 23))
    return seg


snapshots = st.fixed_dictionaries({
    "segments": st.lists(segments(), max_size=3),
    "device_traces": st.lists(st.lists(entries(), max_size=25), max_size=3),
})


def check_model_or_error(path) -> None:
    try:
        snap = open_snapshot(path)
    except MemtuiError:
        return
    check_snapshot(snap)
    for dev in snap.devices:
        n = len(dev.trace)
        for i in range(n):
            dev.event_address_n(i)
        replayer = Replayer(dev)
        for i in {-1, 0, n // 2, n - 1}:
            state = replayer.state_at(i)
            assert state.allocated >= 0 or (dev.trace.size < 0).any() or (dev.blocks.size < 0).any()
        for b in range(len(dev.blocks)):
            text = dev.block_address_n(b)
            if text:
                assert dev.find(text)
    for text in snap.strings.values:
        assert text.isprintable(), repr(text)


@FUZZ
@given(snapshot=snapshots, protocol=st.integers(0, 5))
def test_random_snapshots(tmp_path, snapshot, protocol):
    path = tmp_path / "fuzz.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=protocol))
    check_model_or_error(path)


BASE = pickle.dumps(variants.modern(), protocol=4)


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, len(BASE) - 1), st.integers(0, 255)), min_size=1, max_size=8),
       cut=st.integers(1, len(BASE)))
def test_byte_mutations(tmp_path, edits, cut):
    data = bytearray(BASE)
    for pos, value in edits:
        data[pos] = value
    path = tmp_path / "mutated.pickle"
    path.write_bytes(bytes(data[:cut]))
    check_model_or_error(path)


def test_escape_sequences_never_survive(tmp_path):
    snap = variants.modern()
    snap["device_traces"][0][0]["frames"] = [{"filename": "\x1b]0;pwned\x07", "line": 1, "name": "\x1b[2J"}]
    path = tmp_path / "ansi.pickle"
    path.write_bytes(pickle.dumps(snap))
    model = open_snapshot(path)
    text = model.stacks.frames.describe(int(model.stacks.frame_ids(int(model.devices[0].trace.stack[0]))[0]))
    assert "\x1b" not in text and "\\x1b" in text
    assert np.all([s.isprintable() for s in model.strings.values])
