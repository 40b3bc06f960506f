"""The explorer's pure parts, without a terminal: curves, plot, jumps, search, stacks, columns."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from memtui.model.lifetimes import NONE
from memtui.tui.views import navigation
from memtui.tui.views.device_view import build_device_view
from memtui.tui.views.event_columns import EventColumns
from memtui.tui.views.plot import FILL, column_of_event, event_of_column, raster
from memtui.tui.views.search import looks_like_identifier, run_search
from memtui.tui.views.segment_rows import GAP_ROW, SEGMENT_ROW, SELECTED_CELL, StateLayout
from memtui.tui.views.stack_lines import collapse_repeats, source_context
from tests.conftest import ROOT, shared_files
from tests.tui.helpers import loaded, tiny_path

SMALL_SHARED = [p for p in shared_files("*.pickle") if p.stat().st_size < 5_000_000]


@pytest.mark.parametrize("path", [None] + SMALL_SHARED, ids=lambda p: p.name if p else "tiny")
def test_memory_curves_match_the_replay(path):
    snapshot = loaded(str(path or tiny_path()))
    for d in range(len(snapshot.devices)):
        view = build_device_view(snapshot, d)
        n = view.n_events
        for i in sorted({0, n // 3, n // 2, n - 1} - {-1}) if n else []:
            state = view.replayer.state_at(i)
            assert (view.allocated[i], view.reserved[i]) == (state.allocated, state.reserved), (d, i)


def test_segment_layout_matches_the_replay():
    view = build_device_view(loaded(str(tiny_path())), 0)
    state = view.replayer.state_at(19)
    layout = StateLayout(state)
    free, largest = state.free_per_segment()
    for s in range(layout.n_segments):
        assert layout.free_figures(s) == (free[s], largest[s])
    rows = layout.list_rows()
    for s in range(layout.n_segments):
        parts = [r for r in rows if r.segment == s and r.kind != SEGMENT_ROW]
        assert sum(r.size for r in parts) == int(state.seg_size[s])  # blocks and gaps tile the segment
    assert any(r.kind == GAP_ROW for r in rows)
    bar = layout.bar(0, 20, selected_block=int(layout.blocks_of(0)[0]))
    assert bar[0] == SELECTED_CELL


def test_a_one_event_spike_survives_a_million_events():
    values = np.zeros(1_000_000, np.int64)
    values[777_777] = 100
    picture = raster(values, np.zeros_like(values), cols=50, rows=4, top=100)
    column = column_of_event(777_777, len(values), 50)
    assert picture.kind[0, column] != 0  # drawn to the top row
    assert all(picture.kind[0, c] == 0 for c in range(50) if c != column)
    assert picture.kind[-1, column] in (FILL, 3)
    assert column_of_event(event_of_column(column, len(values), 50), len(values), 50) == column


def test_jumps_on_the_tiny_snapshot():
    dev = loaded(str(tiny_path())).devices[0]
    assert navigation.oom(dev, 0, True).event == 19
    wrapped = navigation.oom(dev, 20, True)
    assert wrapped.event == 19 and "wrapped" in wrapped.message
    only = navigation.oom(dev, 19, True)  # on the only OOM: it comes back to it
    assert only.event == 19 and only.message == "OOM 1 of 1 (the only one)"
    assert navigation.along_life(dev, 3, True).event == 14
    assert navigation.along_life(dev, 15, False).event == 14
    assert "still live" in navigation.along_life(dev, 17, True).message
    assert navigation.same_address(dev, 3, True).event == 14
    assert navigation.same_address(dev, 19, True).event is None  # an OOM has no address
    assert navigation.along_life(dev, 0, True).event is None  # the segment is never freed


def test_search_kinds():
    snapshot = loaded(str(tiny_path()))
    hit = run_search(snapshot, 0, "b0x7f3a00400000_1")
    assert hit.kind == "address_n" and hit.events.tolist() == [10]
    assert run_search(snapshot, 0, "s7f3a40000000_0").matches[0].kind == "segment"
    everything = run_search(snapshot, 0, "0x7f3a00400000")
    assert everything.kind == "address" and everything.events.tolist() == [2, 10]
    assert run_search(snapshot, 0, "7f3a00400000_5").kind == "none"
    text = run_search(snapshot, 0, "BLOCK.forward")
    assert text.kind == "text" and len(text.events) > 5
    assert run_search(snapshot, 0, "add").kind == "none"  # hex-looking, no such frame or address
    assert looks_like_identifier("7f06_0") and looks_like_identifier("0x12") and not looks_like_identifier("bad")


def test_search_finds_an_allocation_on_another_device():
    snapshot = loaded(str(tiny_path()))
    result = run_search(snapshot, 1, "7f3a00000000_0")
    assert result.found and result.device == 0


def test_collapse_and_source(tmp_path: Path):
    assert [(g.frames, g.repeat) for g in collapse_repeats([1, 2, 2, 2, 3, 4, 3, 4, 5])] == [
        ([1], 1), ([2], 3), ([3, 4], 2), ([5], 1)]
    source = tmp_path / "model.py"
    source.write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n")
    assert source_context(str(source), 3) == [(1, "a = 1"), (2, "b = 2"), (3, "c = 3"), (4, "d = 4"), (5, "e = 5")]
    assert source_context("/no/such/file.py", 3) == []


@pytest.mark.parametrize("width", [30, 60, 80, 120, 200])
def test_event_columns_fit_the_width(width):
    view = build_device_view(loaded(str(tiny_path())), 0)
    columns = EventColumns(view)
    layout = columns.layout(width)
    cells, _ = columns.cells(19, layout)
    text = " ".join(cells)
    assert cells[1 if layout.time else 0]  # never an empty row
    if width >= 80:
        # At 80 columns the frame reads as file:line function; the time column gives way first.
        assert len(text) <= width and cells[-1] == "model.py:31 Block.forward"
    if width >= 120:
        assert layout.time
    assert "OOM" in text


def test_block_without_life_is_named_from_the_snapshot():
    snapshot = loaded(str(tiny_path()))
    dev = snapshot.devices[0]
    assert all(int(life) != NONE for life in dev.block_life[dev.block_version != NONE])


def test_every_key_is_documented():
    from memtui.tui.keys import key_reference

    doc = (ROOT / "docs" / "keys.md").read_text()
    for _section, rows in key_reference():
        for keys, what in rows:
            row = f"| `{keys}` | {what} |".replace("`|`", "`\\|`")
            assert row in doc, f"{row} is missing: python -m memtui.tui.keys > docs/keys.md"


def test_source_lines_are_shown_when_the_file_exists(tmp_path: Path):
    from memtui.model import build_model
    from memtui.tui.views.inspector_content import InspectOptions, event_lines
    from tests.fixtures.tiny_snapshot import tiny_snapshot

    source = tmp_path / "train.py"
    source.write_text("".join(f"line_{k} = {k}\n" for k in range(1, 101)))
    raw = tiny_snapshot()
    frame = {"filename": str(source), "line": 88, "name": "train_step"}
    for entry in raw["device_traces"][0]:
        if "frames" in entry:
            entry["frames"] = [frame if f["name"] == "train_step" else f for f in entry["frames"]]
    view = build_device_view(build_model(raw, "tiny.pickle"), 0)
    state = view.replayer.state_at(1)
    shown = "\n".join("".join(t for t, _ in line) for line in event_lines(view, 1, state, InspectOptions()))
    assert "line_88 = 88" in shown and "line_86 = 86" in shown and "line_90 = 90" in shown
    hidden = event_lines(view, 1, state, InspectOptions(show_source=False))
    assert "line_88" not in "\n".join("".join(t for t, _ in line) for line in hidden)


def test_slash_finds_what_the_log_shows_as_the_filter_does():
    # The log shows frames as `file:line function`; `/` finds `oom_uncaught.py:8` as the
    # filter's frame: does, and a function name alone still matches.
    from memtui.open import open_snapshot
    from memtui.query import compile_filter
    from tests.conftest import SAMPLES

    snapshot = open_snapshot(SAMPLES / "run" / "oom_uncaught.oom.pickle.xz")
    device = snapshot.default_device()
    hit = run_search(snapshot, device, "oom_uncaught.py:8")
    assert hit.kind == "text" and len(hit.events)
    assert np.array_equal(compile_filter('frame:"oom_uncaught.py:8"').indices(snapshot, device), hit.events)
    assert run_search(snapshot, device, "<module>").kind == "text"
    assert run_search(snapshot, device, "oom_uncaught.py:9999").kind == "none"


def _marks_one_at_a_time(times: np.ndarray, annotations: list, device: int) -> tuple[list, list, list]:
    """The annotation spans worked out plainly: each START, and the first END of its name at
    or after it."""
    starts = [(a.time_us, a.name) for a in annotations if a.device == device and a.stage == "START"]
    events, end_events, names = [], [], []
    for t, name in starts:
        closes = sorted(a.time_us for a in annotations if a.device == device and a.stage == "END"
                        and a.name == name and a.time_us >= t)
        end = closes[0] if closes else np.inf
        events.append(int(np.searchsorted(times, t, "left")))
        end_events.append(min(int(np.searchsorted(times, end, "right")) - 1, len(times) - 1))
        names.append(name)
    return events, end_events, names


def test_annotation_spans_close_at_the_first_end_of_their_name():
    from memtui.model.snapshot import Annotation
    from memtui.tui.views.device_view import _annotation_marks

    snapshot = copy.copy(loaded(str(tiny_path())))  # its annotations replaced below: not the shared one's
    dev = snapshot.devices[0]
    times = dev.trace.time_us
    assert np.isfinite(times).all() and len(times) > 10
    rng = np.random.default_rng(5)
    low, high = float(times[0]), float(times[-1])
    notes = []
    for k in range(60):  # nested, repeated and unclosed spans of three names, on two devices
        t = float(rng.uniform(low, high))
        notes.append(Annotation(k % 7 == 0, "START", f"step {k % 3}", t))
        if k % 5:
            notes.append(Annotation(k % 7 == 0, "END", f"step {k % 3}", t + float(rng.uniform(0, (high - low) / 4))))
    notes.append(Annotation(0, "START", "at the very end", high))
    snapshot.annotations = notes
    marks = _annotation_marks(snapshot, dev)
    events, end_events, names = _marks_one_at_a_time(times, notes, dev.device)
    assert marks.event.tolist() == events
    assert marks.end_event.tolist() == end_events
    assert marks.names == names


def test_annotations_kept_in_the_cache_are_placed_without_making_each(tmp_path):
    # The first screen made an Annotation of each (16,000 at a million events, 30 ms) to place
    # them; the cache's rows are each one's fields.
    from memtui.cache.store import ModelCache
    from memtui.open import open_snapshot
    from memtui.tui.views.device_view import _annotation_marks

    cache = ModelCache(str(tmp_path / "cache"))
    built = open_snapshot(tiny_path(), cache=cache)
    cache.wait()
    warm = cache.load(tiny_path())
    assert warm is not None and len(warm.annotations) > 0
    assert len(_annotation_marks(built, built.devices[0]).event) > 0
    for dev in warm.devices:
        marks = _annotation_marks(warm, dev)
        assert warm.annotations._made is None  # placed from the rows
        want = _annotation_marks(built, built.devices[dev.device])
        assert marks.event.tolist() == want.event.tolist() and marks.end_event.tolist() == want.end_event.tolist()
        assert marks.names == want.names
    assert list(warm.annotations) == list(built.annotations)
