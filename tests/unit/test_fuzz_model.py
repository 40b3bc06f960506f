"""Fuzzing the loader and model: any input gives a consistent model or a memtui error.

The strategies (tests/fixtures/snapshot_strategies.py) mirror DESIGN.md's format and
then break it: wrong types in fields, negative and huge sizes, frees of unknown
addresses, blocks outside their segment, duplicate addresses, NaN/None times, control
characters and lone surrogates in names, deep nesting, 10,000-frame stacks. Byte
mutations of a real pickle come on top. Every model must pass ``check_snapshot`` and
every text the commands print from it must be terminal-safe and JSON-encodable.
``MEMTUI_FUZZ_EXAMPLES`` raises the number of cases for a long run; the default keeps CI
short.
"""

from __future__ import annotations

import json
import pickle
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memtui.errors import MemtuiError
from memtui.model.checks import check_snapshot
from memtui.open import open_snapshot
from memtui.replay import Replayer
from memtui.services.events import event_row
from memtui.services.info import render_text, summarize
from tests.conftest import SHARED
from tests.fixtures import variants
from tests.fixtures.snapshot_strategies import count_case, fuzz_settings, snapshots

FUZZ = fuzz_settings()


def dump(snapshot: dict, protocol: int) -> bytes:
    # Deeply nested values need more than the default recursion limit to be pickled at all.
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        return pickle.dumps(snapshot, protocol=protocol)
    except ValueError:  # protocols 0 and 1 write ints as decimal text, refused past 4300 digits
        return pickle.dumps(snapshot, protocol=4)
    finally:
        sys.setrecursionlimit(old)


def check_model_or_error(path, streaming: bool = True) -> None:
    try:
        snap = open_snapshot(path, streaming=streaming, cache=None)
    except MemtuiError:
        return
    check_model(snap)


def check_model(snap) -> None:
    """Everything the commands show of ``snap`` can be computed, printed and encoded."""
    findings = check_snapshot(snap)
    summary = summarize(snap)
    json.dumps(summary)
    json.dumps([f.as_dict() for f in findings])
    printed = [render_text(snap, summary)] + [f.message for f in findings]
    for dev in snap.devices:
        n = len(dev.trace)
        t0 = dev.time_origin_us
        for i in range(n):
            dev.event_address_n(i)
            row = event_row(snap, dev.device, i, t0)
            json.dumps(row)
            printed.append(f"{row['action']} {row['address_n']} {row['top_frame']}")
        replayer = Replayer(dev)
        for i in {-1, 0, n // 2, n - 1}:
            state = replayer.state_at(i)
            assert state.allocated >= 0 or (dev.trace.size < 0).any() or (dev.blocks.size < 0).any()
        for b in range(len(dev.blocks)):
            text = dev.block_address_n(b)
            if text:
                assert dev.find(text)
        printed.extend(dev.blocks.state_names)
    printed.extend(snap.strings.values)
    printed.extend(snap.actions.names)
    printed.extend(f"{a.stage} {a.name}" for a in snap.annotations)
    for text in printed:
        for line in text.split("\n"):
            assert line.isprintable(), repr(line)


@FUZZ
@given(snapshot=snapshots, protocol=st.integers(0, 5), streaming=st.booleans())
def test_random_snapshots(tmp_path, snapshot, protocol, streaming):
    count_case("random snapshots")
    path = tmp_path / "fuzz.pickle"
    path.write_bytes(dump(snapshot, protocol))
    check_model_or_error(path, streaming)


def mutation_base() -> bytes:
    real = SHARED / "multistream.pickle"
    return real.read_bytes() if real.exists() else pickle.dumps(variants.modern(), protocol=4)


BASE = pickle.dumps(variants.modern(), protocol=4)
REAL_BASE = mutation_base()


@FUZZ
@given(data=st.data(), real=st.booleans(), streaming=st.booleans())
def test_byte_mutations(tmp_path, data, real, streaming):
    count_case("byte mutations")
    base = REAL_BASE if real else BASE
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(base) - 1), st.integers(0, 255)), min_size=1,
                               max_size=8), label="edits")
    cut = data.draw(st.integers(1, len(base)), label="cut")
    mutated = bytearray(base)
    for pos, value in edits:
        mutated[pos] = value
    path = tmp_path / "mutated.pickle"
    path.write_bytes(bytes(mutated[:cut]))
    check_model_or_error(path, streaming)


def test_escape_sequences_never_survive(tmp_path):
    snap = variants.modern()
    snap["device_traces"][0][0]["frames"] = [{"filename": "\x1b]0;pwned\x07", "line": 1, "name": "\x1b[2J"}]
    path = tmp_path / "ansi.pickle"
    path.write_bytes(pickle.dumps(snap))
    model = open_snapshot(path)
    text = model.stacks.frames.describe(int(model.stacks.frame_ids(int(model.devices[0].trace.stack[0]))[0]))
    assert "\x1b" not in text and "\\x1b" in text
    assert np.all([s.isprintable() for s in model.strings.values])
