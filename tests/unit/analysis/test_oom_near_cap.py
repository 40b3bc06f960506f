"""Two OOM verdicts that real files got wrong: a near-cap request with expandable segments
on, and a device size the snapshot does not record."""

from __future__ import annotations

import dataclasses

from memtui.analysis.oom import _verdict, diagnose_ooms
from memtui.report.oom import explain
from tests.tui.helpers import loaded, tiny_path

MIB, GIB = 1 << 20, 1 << 30


def _under_cap(**fields):
    d = diagnose_ooms(loaded(str(tiny_path())), 0)[0]
    return dataclasses.replace(d, process_limit=True, evidence=[], alternatives=[], pinned=None,
                               private_pool_reserved=0, released_before=0, **fields)


def test_a_request_within_a_page_of_what_the_cap_left_is_capacity():
    # Expandable segments on: 6 MiB free in holes, the cap leaving at least 95 MiB more, a
    # 100 MiB request. Covered by 1 MiB, less than the page it maps: it did not fit.
    d = _under_cap(requested=100 * MIB, usable_free=6 * MIB, largest_free_block=6 * MIB, expandable_already=True,
                   headroom_at_least=95 * MIB, device_free=40 * GIB)
    _verdict(d, 95 * MIB)
    assert d.verdict == "capacity" and d.confidence == "medium"
    assert any("expandable segments" in e.text and "page" in e.text for e in d.evidence)
    # With room to spare it is fragmentation, as before.
    d = _under_cap(requested=100 * MIB, usable_free=30 * MIB, largest_free_block=6 * MIB, expandable_already=True,
                   headroom_at_least=95 * MIB, device_free=40 * GIB)
    _verdict(d, 95 * MIB)
    assert d.verdict == "fragmentation"


def test_an_unrecorded_device_size_is_a_lower_bound_not_a_card():
    d = diagnose_ooms(loaded(str(tiny_path())), 0)[0]
    d = dataclasses.replace(d, process_limit=False, device_total=int(7.79 * GIB), device_total_estimated=True,
                            non_pytorch=GIB)
    j = d.to_json()
    assert j["device_total"] is None and j["device_total_at_least"] == int(7.79 * GIB)
    text = " ".join(explain(dataclasses.replace(d, verdict="capacity")))
    assert "at least 7.79 GiB" in text and "not recorded" in text
