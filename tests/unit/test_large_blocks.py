"""The compiled half's large blocks ask the kernel for 2 MiB pages (src/memtui_native/large.c):
a cold open then takes one page fault per 2 MiB of its columns instead of 512. Checked where
the kernel says so, in the process's own map: the block's mapping carries the advice, and
under glibc it starts on a 2 MiB boundary, so that all of it can be such pages."""

from __future__ import annotations

import pickle
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

from memtui.compiled import native
from memtui.model import actions as act

HUGE_PAGE = 2 << 20
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

pytestmark = [
    pytest.mark.skipif(native is None, reason="built without a C compiler"),
    pytest.mark.skipif(not sys.platform.startswith("linux") or not THP.exists(),
                       reason="the kernel lends no 2 MiB pages on request"),
]


def _mapping_of(address: int) -> tuple[int, set[str]]:
    """The start and the flags of the process's mapping that holds ``address``."""
    start = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(x, 16) for x in head.split("-"))
            start = low if low <= address < high else None
        elif head == "VmFlags:" and start is not None:
            return start, set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _assert_large_block(array: np.ndarray) -> None:
    assert array.nbytes >= HUGE_PAGE
    start, flags = _mapping_of(_address(array))
    assert "hg" in flags  # MADV_HUGEPAGE
    if platform.libc_ver()[0] == "glibc":
        assert start % HUGE_PAGE == 0


def test_a_compiled_curve_lies_on_2_mib_pages():
    # A scanner made first, as every open makes one: it has glibc map each large block on its
    # own (scan.c, map_large_blocks), which the alignment relies on. Without it, a process
    # that has freed large blocks may be given this one from its heap.
    native.Scanner()
    n = 1 << 19  # 4 MiB of int64
    action = np.full(n, act.SEGMENT_ALLOC, np.int16)
    signs = np.zeros(max(act.SEGMENT_ACTIONS) + 1, np.int8)
    signs[act.SEGMENT_ALLOC] = 1
    curve = np.frombuffer(native.reserved_curve(action, np.ones(n, np.int64), signs.tobytes()), np.int64)
    assert curve[-1] == n
    _assert_large_block(curve)


def test_the_scanners_columns_lie_on_2_mib_pages():
    entry = {"action": "alloc", "addr": 0x7F0000000000, "size": 512, "stream": 0, "time_us": 1.5, "frames": []}
    rows = 1 << 18  # 2 MiB of 8-byte addresses, and of times
    data = pickle.dumps({"segments": [], "device_traces": [[dict(entry) for _ in range(rows)]]}, protocol=4)
    scanner = native.Scanner()
    scanner.feed(data, True)
    trace = scanner.finish(len(data))["traces"][0]
    addr_buffer, width = trace["addr"]
    assert width == 8
    addr = np.frombuffer(addr_buffer, np.int64)
    times = np.frombuffer(trace["time_us"], np.float64)
    assert len(addr) == len(times) == rows and addr[-1] == entry["addr"] and times[-1] == 1.5
    _assert_large_block(addr)
    _assert_large_block(times)
