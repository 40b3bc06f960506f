"""Memory made on the autograd thread (no stack) has one call site in every analysis: the
backward() line it ran under (memtui/analysis/attribution.py), in leaks, oom and top alike."""

from __future__ import annotations

from memtui.analysis.attribution import AUTOGRAD_SITE
from memtui.analysis.leaks import find_leaks
from memtui.analysis.oom import diagnose_ooms
from memtui.services.top import largest_live_blocks
from tests.conftest import SAMPLES
from tests.fixtures.opened import cached

OOM_TRAINING = SAMPLES / "oom_training.pickle.xz"  # its backward() at generate.py:77 allocates without a stack


def test_oom_top_and_leaks_name_the_same_backward_line():
    snapshot = cached(str(OOM_TRAINING))
    dev = snapshot.devices[0]
    backward = {s.label for s in find_leaks(snapshot, dev).sites if s.label.startswith("(autograd thread)")}
    assert len(backward) == 1
    (label,) = backward
    assert label == AUTOGRAD_SITE.format(label.removeprefix(AUTOGRAD_SITE.format("")))

    (oom,) = diagnose_ooms(snapshot, 0)
    assert oom.site is not None and oom.site["site"] == label  # the request itself, made in backward()
    held = {s["site"]: s for s in oom.top_sites}
    assert label in held and "(no stack)" not in held
    assert held[label]["frames"] and held[label]["frames"][0]["line"] == 77
    assert {a["site"] for a in oom.largest_allocations} & {label}

    rows = largest_live_blocks(snapshot, 50, 0)
    stackless = [r for r in rows if not r["top_frame"]]
    assert stackless and all(r["attributed_to"] == label for r in stackless)
    assert all(r["attributed_to"] is None for r in rows if r["top_frame"])
