"""The explorer freezes what an open made once its first screen is drawn (gc.freeze): in this
one test process, what each test's app froze is let back into the collector after the test.

Pilot's key presses and pauses wait until the process looks idle: Textual samples the CPU
time over 20 ms windows until one used under 5% of it (textual._wait), at least twice a
key. The tests sample 5 ms windows against the same 5%: the same condition awaited, a
third of the explorer tests' time no longer spent asleep after the work is done."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True, scope="session")
def _idle_sampled_every_5_ms():
    import textual._wait as wait

    if not hasattr(wait, "SLEEP_GRANULARITY") or not hasattr(wait, "SLEEP_IDLE"):
        yield  # another Textual: its own waits, slower but the same
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wait, "SLEEP_GRANULARITY", 0.005)
        patch.setattr(wait, "SLEEP_IDLE", 0.005 / 20)
        yield


@pytest.fixture(autouse=True)
def _collector_let_back_in():
    yield
    gc.unfreeze()
