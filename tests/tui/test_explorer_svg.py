"""SVG snapshots of the explorer at fixed sizes (pytest-textual-snapshot).

They use the fixed tiny snapshot, so they never skip and never depend on the machine.
After an intended change to the look or to the keys (or a new Textual: update the pins of
the ``test`` extra in pyproject.toml, which the test command installs), regenerate them
with ``pytest tests/tui/test_explorer_svg.py --snapshot-update`` and review the SVGs.
Under another Textual they skip, except where ``MEMTUI_REQUIRE_SVG=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import os
import re

import pytest
import textual

from tests.conftest import ROOT
from tests.tui.helpers import make_app, ready, tiny_path

# The baselines were drawn by the Textual the test extra pins; another draws the same screens
# with other bytes (glyph widths, colours, spacing), so they are compared only under it.
BASELINE_TEXTUAL = re.search(r'"textual==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
if textual.__version__ != BASELINE_TEXTUAL and os.environ.get("MEMTUI_REQUIRE_SVG") == "1":
    raise RuntimeError(f"the SVG tier needs Textual {BASELINE_TEXTUAL} (pip install -e '.[test]'), "
                       f"not {textual.__version__}")
pytestmark = pytest.mark.skipif(textual.__version__ != BASELINE_TEXTUAL,
                                reason=f"SVG baselines were made with Textual {BASELINE_TEXTUAL}, "
                                       f"not {textual.__version__}: regenerate them to compare")


async def _ready(pilot) -> None:
    await ready(pilot.app, pilot)


def _then(*keys: str):
    async def run_before(pilot) -> None:
        await ready(pilot.app, pilot)
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


def test_main_screen(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(120, 40), run_before=_ready)


def test_main_screen_small_terminal(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(80, 24), run_before=_ready)


def test_oom_view(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(100, 30), run_before=_then("o"))


def test_oom_detail(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(100, 30), run_before=_then("o", "enter"))


def test_segment_list_mode(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(100, 30), run_before=_then("tab", "m", "down", "down"))


def test_help(snap_compare):
    assert snap_compare(make_app(tiny_path()), terminal_size=(80, 24), run_before=_then("question_mark"))
