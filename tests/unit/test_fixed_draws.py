"""The fixed profile draws the same cases whatever the process imported before.

Hypothesis mixes constants read from loaded project modules into what it draws; a fuzz
test then drew other cases after other tests had imported other modules, and a failing
case came on some runs only. tests/conftest.py turns that off for the fixed profile."""

from __future__ import annotations

import importlib
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import _RANDOM


def drawn() -> list:
    seen: list = []

    @settings(max_examples=200, derandomize=True, database=None)
    @given(st.integers(), st.text(max_size=8), st.floats(allow_nan=False))
    def record(number, text, real):
        seen.append((number, text, real))

    record()
    return seen


@pytest.mark.skipif(_RANDOM, reason="the random profile explores on purpose")
def test_a_newly_imported_module_does_not_change_the_cases(tmp_path, monkeypatch):
    before = drawn()
    module = tmp_path / "memtui_constants_probe.py"
    module.write_text("\n".join(f"VALUE_{i} = {12345 + i * 7919}\nNAME_{i} = 'probe-{i}'" for i in range(200)))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("memtui_constants_probe")
        assert drawn() == before
    finally:
        sys.modules.pop("memtui_constants_probe", None)
