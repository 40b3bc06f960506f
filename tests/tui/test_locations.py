"""The one rule for printing a code location in a column: ``file.py:line function``, the
function cut before the line number, the line number never cut while it fits."""

from __future__ import annotations

import pytest

from memtui.tui.views.locations import fit_location, frame_location, site_location

LOC = frame_location("/work/steering/tools/gen_snapshots.py", 213, "w_oom_training")


def test_short_text_drops_the_folder_and_keeps_the_full_path_apart():
    assert LOC.short == "gen_snapshots.py:213 w_oom_training"
    assert LOC.full == "/work/steering/tools/gen_snapshots.py:213 w_oom_training"
    assert LOC.keep == len("gen_snapshots.py:213")


@pytest.mark.parametrize("width, expected", [
    (60, "gen_snapshots.py:213 w_oom_training"),
    (35, "gen_snapshots.py:213 w_oom_training"),
    (30, "gen_snapshots.py:213 w_oom_tr…"),
    (22, "gen_snapshots.py:213 …"),
    (21, "gen_snapshots.py:213"),
    (20, "gen_snapshots.py:213"),
    (18, "…_snapshots.py:213"),  # the file name gives way, the line number stays
    (17, "…snapshots.py:213"),
    (6, "…y:213"),
    (4, "213"),
    (2, "21"),
])
def test_cutting_never_reaches_the_line_number_first(width, expected):
    text = LOC.fit(width)
    assert text == expected and len(text) <= width
    if width >= 4:
        assert "213" in text


def test_every_width_keeps_the_line_number():
    for width in range(4, 50):
        text = LOC.fit(width)
        assert len(text) <= width and ":213" in text or text == "213", (width, text)


def test_text_without_a_location_is_cut_at_its_end():
    assert fit_location("AddmmBackward0 (backward) [C++]", 10) == "AddmmBack…"


def test_call_sites_print_short_and_keep_cpp_frames():
    frames = [{"filename": "/home/u/project/model.py", "line": 31, "name": "Block.forward"},
              {"filename": "/home/u/project/train.py", "line": 88, "name": "train_step"}]
    label = "/home/u/project/model.py:31 Block.forward <- /home/u/project/train.py:88 train_step"
    site = site_location(label, frames)
    assert site.short == "model.py:31 Block.forward <- train.py:88 train_step"
    assert site.full == label and site.fit(14) == "model.py:31 B…"
    native = site_location("AddmmBackward0 (backward) [C++]",
                           [{"filename": "??", "line": 0, "name": "torch::autograd::generated::AddmmBackward0::apply"}])
    assert native.short == "AddmmBackward0 (backward) [C++]"
    assert site_location("(no stack)", []).short == "(no stack)"
