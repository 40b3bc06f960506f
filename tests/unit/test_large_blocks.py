"""The compiled half's large blocks ask the kernel for 2 MiB pages (src/memtui_native/large.c):
a cold open then takes one page fault per 2 MiB of its columns instead of 512. Checked where
the kernel says so, in the process's own map: the block's mapping carries the advice. Where
it starts (on a 2 MiB boundary, so that all of it can be such pages) is the kernel's and the
C library's choice, which a process that has freed large blocks, or an older kernel, makes
otherwise; so it is not asserted."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from memtui.compiled import native
from memtui.model import actions as act

HUGE_PAGE = 2 << 20
THP = Path("/sys/kernel/mm/transparent_hugepage")


def _lends_2_mib_pages() -> bool:
    size = THP / "hpage_pmd_size"
    return sys.platform.startswith("linux") and size.exists() and size.read_text().strip() == str(HUGE_PAGE)


pytestmark = pytest.mark.skipif(native is None, reason="built without a C compiler")
lends_2_mib_pages = pytest.mark.skipif(not _lends_2_mib_pages(), reason="the kernel lends no 2 MiB pages on request")


def _flags_of_mapping(address: int) -> set[str]:
    """The flags of the process's mapping that holds ``address``."""
    holds = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(x, 16) for x in head.split("-"))
            holds = low <= address < high
        elif head == "VmFlags:" and holds:
            return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _assert_large_block(array: np.ndarray) -> None:
    assert array.nbytes >= HUGE_PAGE
    assert "hg" in _flags_of_mapping(_address(array))  # MADV_HUGEPAGE


@lends_2_mib_pages
def test_a_compiled_curve_lies_on_2_mib_pages():
    n = 1 << 19  # 4 MiB of int64
    action = np.full(n, act.SEGMENT_ALLOC, np.int16)
    signs = np.zeros(max(act.SEGMENT_ACTIONS) + 1, np.int8)
    signs[act.SEGMENT_ALLOC] = 1
    curve = np.frombuffer(native.reserved_curve(action, np.ones(n, np.int64), signs.tobytes()), np.int64)
    assert curve[-1] == n
    _assert_large_block(curve)


@lends_2_mib_pages
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


def test_a_reader_holds_no_more_than_its_limit_however_its_buffer_is_sized(tmp_path):
    """A reader's buffer doubles, each size rounded up for 2 MiB pages; the doubling stops
    at the limit itself, so one object larger than the limit is refused, not read."""
    limits = native._parallel_limits()
    mib = 1 << 20
    # reads of 3 MiB, a limit of 4 MiB: the buffer is 4 MiB less 64 bytes, then the limit
    native._parallel_limits(limits[0], limits[1], limits[2], 3 * mib, limits[4], limits[5], 4 * mib)
    try:
        path = tmp_path / "big_string.pickle"
        path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]], "note": "x" * (6 * mib)}, protocol=4))
        scanner = native.Scanner()
        with open(path, "rb") as fh, pytest.raises(native.Unsupported, match="larger than the scanner holds"):
            scanner.scan_file(fh.fileno(), path.stat().st_size, 1, None)
        small = tmp_path / "small_string.pickle"
        small.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]], "note": "x" * (3 * mib)}, protocol=4))
        scanner = native.Scanner()
        with open(small, "rb") as fh:
            scanner.scan_file(fh.fileno(), small.stat().st_size, 1, None)
        assert scanner.finish(small.stat().st_size)["root"]["note"] == "x" * (3 * mib)
    finally:
        native._parallel_limits(*limits)
