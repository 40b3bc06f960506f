"""The explorer freezes what an open made once its first screen is drawn (gc.freeze): in this
one test process, what each test's app froze is let back into the collector after the test."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
def _collector_let_back_in():
    yield
    gc.unfreeze()
