"""Random export/reopen cycles: a random filter of a random snapshot, exported, reopened.

The reopened export must pass the same checks as any model (test_fuzz_model.check_model)
and hold exactly the rows the filter selects, each the same event (action, address, size,
stream, time, device_free and, with stacks, its top frame); exporting the reopened model
whole and reopening that gives the same rows again. Any failure must be a memtui error.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memtui.errors import MemtuiError
from memtui.export.writer import export_snapshot
from memtui.open import open_snapshot
from memtui.query import compile_filter
from tests.fixtures.snapshot_strategies import count_case, fuzz_settings, snapshots
from tests.unit.test_fuzz_model import check_model, dump

FUZZ = fuzz_settings(12)


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def draw_filter(draw, snap, depth: int = 0) -> str:
    """A filter over what ``snap`` holds (docs/filter.md), nested up to three levels."""
    if depth < 3 and draw(st.integers(0, 3)) == 0:
        shape = draw(st.sampled_from(["and", "or", "not"]))
        if shape == "not":
            return "not " + draw_filter(draw, snap, depth + 1)
        parts = [draw_filter(draw, snap, depth + 1) for _ in range(2)]
        return "(" + (" or " if shape == "or" else " ").join(parts) + ")"
    kind = draw(st.sampled_from(["all", "action", "size", "flag", "event", "stream", "file", "func", "ctx"]))
    texts = [t for t in snap.strings.values if t] or ["x"]
    if kind == "all":
        return ""
    if kind == "action":
        return "action:" + quoted(draw(st.sampled_from(snap.actions.names)))
    if kind == "size":
        return f"size{draw(st.sampled_from(['>', '<', '>=', '<=']))}{draw(st.integers(0, 1 << 24))}"
    if kind == "flag":
        return draw(st.sampled_from(["live", "leaked", "freed"]))
    if kind == "event":
        a, b = sorted(draw(st.integers(0, 40)) for _ in range(2))
        return f"event:{a}..{b}"
    if kind == "stream":
        return f"stream:{draw(st.integers(0, 3))}"
    text = draw(st.sampled_from(texts))
    start = draw(st.integers(0, max(0, len(text) - 1)))
    return f"{kind}:" + quoted(text[start:start + draw(st.integers(1, 8))])


def same_rows(old, new, rows: np.ndarray, stacks: bool) -> None:
    for d in rows:
        want, got = old.devices[d].trace, new.devices[d].trace
        picked = rows[d]
        assert len(got) == len(picked)
        assert [old.actions.names[a] for a in want.action[picked]] == [new.actions.names[a] for a in got.action]
        for column in ("addr", "size", "stream", "device_free"):
            assert np.array_equal(getattr(want, column)[picked], getattr(got, column)), column
        assert np.array_equal(want.time_us[picked], got.time_us, equal_nan=True)
        if stacks:
            assert [old.stacks.top_frame_text(int(s)) for s in want.stack[picked]] == \
                [new.stacks.top_frame_text(int(s)) for s in got.stack]


@FUZZ
@given(snapshot=snapshots, data=st.data())
def test_export_reopen_cycles(tmp_path, snapshot, data):
    count_case("export/reopen cycles")
    source = tmp_path / "random.pickle"
    source.write_bytes(dump(snapshot, 4))
    try:
        snap = open_snapshot(source, cache=None)
    except MemtuiError:
        return
    text = draw_filter(data.draw, snap)
    device = data.draw(st.none() | st.sampled_from(range(len(snap.devices))) if snap.devices else st.none(),
                       label="device")
    stacks = data.draw(st.booleans(), label="include stacks")
    out = tmp_path / "export.msgpack"
    try:
        compiled = compile_filter(text)
        export_snapshot(snap, out, text, device, include_stacks=stacks, force=True)
    except MemtuiError:
        return
    reopened = open_snapshot(out, cache=None)
    check_model(reopened)
    devices = range(len(snap.devices)) if device is None else [device]
    rows = {d: compiled.indices(snap, d) for d in devices}
    same_rows(snap, reopened, rows, stacks)
    assert reopened.header["filter"] == text

    again = tmp_path / "again.msgpack"
    export_snapshot(reopened, again, "", device, include_stacks=stacks, force=True)
    twice = open_snapshot(again, cache=None)
    same_rows(reopened, twice, {d: np.arange(len(reopened.devices[d].trace)) for d in devices}, stacks)


def test_lone_surrogate_survives_export_and_reopen(tmp_path):
    """Found by the cycles above: a lone surrogate in ``compile_context`` (pickle allows it,
    torch can write it) crashed the msgpack writer. It is written and read back unchanged."""
    entry = {"action": "alloc", "addr": 0x7F0000000000, "size": 512, "stream": 0, "time_us": 1,
             "compile_context": "\ud800lone", "user_metadata": "x\udcff", "frames": []}
    snapshot = {"segments": [], "device_traces": [[entry]], "allocator_settings": {}}
    source = tmp_path / "surrogate.pickle"
    source.write_bytes(dump(snapshot, 4))
    snap = open_snapshot(source, cache=None)
    out = tmp_path / "export.msgpack"
    export_snapshot(snap, out, "", None, include_stacks=True, force=True)
    reopened = open_snapshot(out, cache=None)
    check_model(reopened)
    for text in ("\ud800lone", "x\udcff"):  # the same strings as the source, escaped for the screen alike
        assert reopened.strings.find(text) is not None
        assert reopened.strings[reopened.strings.find(text)] == snap.strings[snap.strings.find(text)]
