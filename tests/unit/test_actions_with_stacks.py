"""The action codes that carry a stack somewhere in a trace: marked in a table of codes, the
same set as the distinct codes of the events with a stack."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from memtui.model.trace_figures import stacked_actions
from tests.fixtures.opened import cached

SAMPLES = sorted((Path(__file__).parents[2] / "sample_snapshots").glob("*.pickle.xz"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_codes_are_those_of_the_events_with_a_stack(path):
    for dev in cached(str(path)).devices:
        trace = dev.trace
        assert dev.actions_with_stacks == {int(a) for a in np.unique(trace.action[trace.stack >= 0])}


def test_no_stack_anywhere_and_a_code_past_the_known_ones():
    dev = cached(str(SAMPLES[0])).devices[0]
    bare = dataclasses.replace(dev.trace, stack=np.full(len(dev.trace), -1, dev.trace.stack.dtype))
    assert stacked_actions(bare.action, bare.stack) == []
    action = dev.trace.action.copy()
    action[0] = 40  # an action this version has never seen gets the next free code
    stack = dev.trace.stack.copy()
    stack[0] = 0
    odd = dataclasses.replace(dev.trace, action=action, stack=stack)
    assert 40 in stacked_actions(odd.action, odd.stack)


@pytest.mark.parametrize("path", SAMPLES[:2], ids=lambda p: p.name)
def test_a_warm_open_reads_them_from_the_cache(path, tmp_path, monkeypatch):
    # Kept as a figure of the trace: no key of a warm open waits on a pass over every event.
    from memtui.cache.store import ModelCache
    from memtui.model import trace_figures
    from memtui.open import open_snapshot

    cache = ModelCache(str(tmp_path))
    first = open_snapshot(path, cache=cache)
    cache.wait()
    monkeypatch.setattr(trace_figures, "stacked_actions", None)  # a pass now would fail
    warm = open_snapshot(path, cache=cache)
    assert [dev.actions_with_stacks for dev in warm.devices] == [dev.actions_with_stacks for dev in first.devices]
