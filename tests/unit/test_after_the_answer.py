"""Work the explorer does after its first screen (its cache writes, its time-travel index) runs
at a lower CPU priority than the thread that draws, on threads of its own (memtui/cores.py)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from memtui.cache.store import ModelCache
from memtui.cores import AFTER_THE_ANSWER_NICE, after_the_answer, run_after_the_answer

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's priority is its own on Linux"),
    pytest.mark.skipif(os.getpriority(os.PRIO_PROCESS, 0) >= AFTER_THE_ANSWER_NICE,
                       reason="the tests run at that priority already"),
]


def _mine() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_work_runs_lower_and_the_callers_thread_keeps_its_priority():
    before = _mine()
    assert after_the_answer(_mine) == AFTER_THE_ANSWER_NICE
    assert _mine() == before


def test_what_the_work_raises_is_raised_in_the_caller():
    def fails():
        raise ValueError("index of other intervals")

    with pytest.raises(ValueError, match="other intervals"):
        after_the_answer(fails)


def test_only_the_calling_thread_is_lowered():
    seen: list[int] = []

    def lowered():
        run_after_the_answer()
        seen.append(_mine())

    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join()
    assert seen == [AFTER_THE_ANSWER_NICE] and _mine() < AFTER_THE_ANSWER_NICE


@pytest.mark.parametrize("explorer", [False, True])
def test_cache_writes_run_lower_only_for_the_explorer(tmp_path, explorer):
    cache = ModelCache(str(tmp_path))
    cache.writes_after_the_answer = explorer
    seen: list[int] = []
    cache.write_later(lambda: seen.append(_mine()))
    cache.wait()
    assert (seen[0] == AFTER_THE_ANSWER_NICE) == explorer

