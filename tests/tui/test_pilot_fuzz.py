"""Random key sequences and terminal sizes on the explorer: nothing may raise.

Each run draws keys from every binding of the explorer (panes, jumps, search and filter
bars with random text, analyses, export, help, palette) and resizes the terminal now and
then, down to a few cells; the app must survive all of it (Pilot re-raises anything the
app did not handle). Sequences come from fixed seeds so a failure names the seed that
reproduces it. A long run (``MEMTUI_FUZZ_EXAMPLES``) plays more sequences.
"""

from __future__ import annotations

import os
import random

import pytest

from tests.conftest import SHARED
from tests.fixtures.snapshot_strategies import LONG_RUN, count_case
from tests.tui.helpers import make_app, ready, tiny_path

# A sequence takes seconds where a model case takes milliseconds: a long run plays one
# sequence for every 50 cases it asks for.
SEQUENCES = max(1, int(os.environ.get("MEMTUI_FUZZ_EXAMPLES", "0")) // 50) if LONG_RUN else 1
STEPS = 40

KEYS = ["up", "down", "pageup", "pagedown", "home", "end", "g", "G", "j", "k", "h", "l", "left", "right", "tab",
        "shift+tab", "enter", "escape", "o", "O", "n", "N", "left_square_bracket", "right_square_bracket", "f", "F",
        "d", "t", "c", "m", "w", "L", "C", "D", "R", "question_mark"]
TYPED = ["7f", "_0", "alloc", "size>1MiB", "live", "leaked or action:oom", "(", "file:train", "\\", "zz", "0x", ""]
SIZES = [(120, 40), (80, 24), (40, 12), (200, 60), (20, 6), (10, 3), (100, 30)]


def real_snapshot():
    for name in ("oom_real.pickle", "multistream.pickle"):
        if (SHARED / name).exists():
            return SHARED / name
    return tiny_path()


async def play(path, seed: int, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # an export from the dialog lands here
    rng = random.Random(seed)
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        for _ in range(STEPS):
            roll = rng.random()
            if roll < 0.08:
                await pilot.resize_terminal(*rng.choice(SIZES))
            elif roll < 0.16:
                opener = rng.choice(["slash", "backslash"])
                text = rng.choice(TYPED)
                await pilot.press(opener, *text, rng.choice(["enter", "escape", "enter"]))
            elif roll < 0.19:
                await pilot.press("x", *rng.choice([["escape"], ["enter"], ["tab", "enter"]]))
            elif roll < 0.21:
                await pilot.press("ctrl+p", *rng.choice(["peak", "help", "map"]), "enter")
            else:
                await pilot.press(rng.choice(KEYS))
        await app.workers.wait_for_complete()
        await pilot.pause()


@pytest.mark.parametrize("seed", range(SEQUENCES))
async def test_random_keys_on_a_real_snapshot(seed, monkeypatch, tmp_path):
    count_case("explorer key sequences")
    await play(real_snapshot(), seed, monkeypatch, tmp_path)
