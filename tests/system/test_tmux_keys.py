"""System test: keys typed into a real terminal (tmux) the moment the explorer shows, or
before it shows, all land: ``/``, an address_n and Enter put the cursor on that allocation.

Run several times per case: the bug this guards against (keys routed before the focus
moved) showed 0 to 3 times in 4. Skipped when tmux is not installed.
"""

from __future__ import annotations

import sys

import pytest

from tests.system.test_tmux_smoke import TMUX, Tmux
from tests.tui.helpers import tiny_path
from tests.tui.test_key_order import _names

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
REPEATS = 4


def _search_lands(name: str, event: int, *, wait_for_screen: bool, second: tuple[str, int] | None = None) -> None:
    tmux = Tmux(f"{sys.executable} -m memtui {tiny_path()}", width=100, height=30)
    try:
        if wait_for_screen:
            tmux.wait_for(r"^─Events", timeout=60)  # the first paint of the explorer; no pause after it
        tmux.keys("/" + name, literal=True)
        tmux.keys("Enter")
        text, _ = tmux.wait_for(rf"^▶\s*{event}\s", timeout=30)
        assert "Event " not in text.splitlines()[0]  # no detail screen opened by a stray Enter
        if second is not None:
            name2, event2 = second
            tmux.keys("/" + name2, literal=True)  # right after the first one landed
            tmux.keys("Enter")
            tmux.wait_for(rf"^▶\s*{event2}\s", timeout=30)
        tmux.keys("q")
        tmux.wait_for(r"^EXIT=0$", timeout=30)
    finally:
        tmux.close()


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_search_typed_as_the_explorer_first_shows(attempt):
    (name, event), second, _ = _names()
    _search_lands(name, event, wait_for_screen=True, second=second)


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_search_typed_before_the_explorer_shows(attempt):
    (name, event), *_ = _names()
    _search_lands(name, event, wait_for_screen=False)
