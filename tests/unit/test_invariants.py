"""Invariants that must hold on any snapshot: every file the tests can see, and random ones.

No expected output is copied from a file here: each check compares two things memtui
computes independently (the replayed trace and the file's own segment list; the label
every view prints and the one frame rule), or a figure against what the allocator makes
impossible (allocated over reserved, negative free, a block outside every segment).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from memtui.analysis.callsites import CallSites
from memtui.errors import UsageError
from memtui.export.convert import convert_file
from memtui.export.writer import export_snapshot
from memtui.load.normalize import normalize
from memtui.model import Snapshot, build_model
from memtui.model import actions as act
from memtui.model.lifetimes import NONE
from memtui.model.relevance import is_internal_frame
from memtui.model.segments import ALLOCATED, PENDING_FREE
from memtui.open import open_snapshot
from memtui.replay import Replayer
from memtui.services.stack import describe_match
from tests.conftest import sample_files, scenario_files, shared_files
from tests.fixtures.allocator_sim import allocator_snapshots
from tests.fixtures.opened import cached

FILES = [pytest.param(p, id=p.name) for p in sample_files() + scenario_files()]
FILES += [pytest.param(p, id=f"shared-{p.name}", marks=pytest.mark.shared) for p in shared_files()
          if not p.name.startswith("big_trace")]


def _moments(n: int, ooms: np.ndarray) -> list[int]:
    """Events to check: the start, the end, every OOM, and a spread in between."""
    picks = {-1, n - 1, *[int(i) for i in ooms]}
    picks |= {int(i) for i in np.linspace(0, max(n - 1, 0), num=min(n, 12))}
    return sorted(i for i in picks if i < n)


def check_replay_ends_at_the_file(snapshot: Snapshot) -> None:
    """Replaying a device's trace to its last event gives the file's segments and live blocks."""
    for dev in snapshot.devices:
        state = Replayer(dev).state_at(len(dev.trace) - 1)
        want_segments = Counter(zip(dev.segments.address.tolist(), dev.segments.total_size.tolist()))
        got_segments = Counter(zip(state.seg_addr.tolist(), state.seg_size.tolist()))
        if dev.segments.expandable.any():
            # Expandable segments replay as mapped ranges: compare the bytes mapped.
            assert state.reserved == dev.reserved, f"device {dev.device}: mapped bytes differ"
        else:
            assert got_segments == want_segments, f"device {dev.device}: replayed segments differ from the file"
        live = (dev.blocks.state == ALLOCATED) | (dev.blocks.state == PENDING_FREE)
        want_blocks = Counter(zip(dev.blocks.address[live].tolist(), dev.blocks.size[live].tolist()))
        got_blocks = Counter(zip(state.blk_addr.tolist(), state.blk_size.tolist()))
        assert got_blocks == want_blocks, f"device {dev.device}: replayed live blocks differ from the file"
        assert state.allocated == dev.allocated and state.active == dev.active


def check_no_impossible_figure(snapshot: Snapshot) -> None:
    """At any moment: allocated <= active <= reserved, no negative free, no block outside
    every segment, no two live blocks overlapping."""
    for dev in snapshot.devices:
        replayer = Replayer(dev)
        for i in _moments(len(dev.trace), dev.oom_indices()):
            state = replayer.state_at(i)
            assert 0 <= state.allocated <= state.active <= state.reserved, f"device {dev.device} event {i}"
            free, largest, _ = state.free_runs_per_segment()
            assert (free >= 0).all() and (largest <= state.seg_size).all(), f"device {dev.device} event {i}"
            assert (state.blk_segment != NONE).all(), f"device {dev.device} event {i}: a block outside every segment"
            if len(state.blk_addr) > 1 and state.blk_addr.dtype != object:
                ends = state.blk_addr[:-1].astype(np.int64) + state.blk_size[:-1]
                assert (ends <= state.blk_addr[1:].astype(np.int64)).all(), f"event {i}: live blocks overlap"


def check_labels_are_never_internal(snapshot: Snapshot) -> None:
    """No label any view prints is the recorder's or the allocator's own frame."""
    stacks, frames = snapshot.stacks, snapshot.frames
    for sid in range(len(stacks)):
        fid = int(stacks.label[sid])
        assert fid >= 0
        ids = stacks.frame_ids(sid)
        if not frames.internal[ids].all():
            assert not frames.internal[fid], stacks.top_frame_text(sid)
        for shown in stacks.visible_frames(sid):
            assert not is_internal_frame(frames.filename_of(shown), frames.name_of(shown)) or frames.internal[ids].all()
    sites = CallSites(stacks)
    for sid in range(len(stacks)):
        # The call-site tables (leaks, diff, oom) name an allocation as the event log does.
        assert sites.label(sites.of_stack(sid)) == stacks.top_frame_text(sid)
    for dev in snapshot.devices:
        for i in _moments(len(dev.trace), dev.oom_indices()):
            if i < 0:
                continue
            text = snapshot.event_top_frame(dev.device, i)
            assert "unwind" not in text and "CapturedTraceback" not in text and "CachingAllocator" not in text
            match = next(iter(dev.find(dev.event_address_n(i))), None) if dev.event_address_n(i) else None
            if match is not None:
                described = describe_match(snapshot, match, all_frames=False)
                for event in described["events"].values():  # memtui stack, without --all-frames
                    assert not any(is_internal_frame(f["filename"], f["name"]) for f in event["stack"])


def check_exports_keep_the_source(snapshot: Snapshot, folder) -> None:
    """Exported (filtered or whole) and reopened: every event keeps its source index,
    address_n and time; nothing shows an impossible figure; a filtered export is not
    converted into a pickle memory_viz would replay into nonsense."""
    for name, filter_text in (("whole", ""), ("allocs", "action:alloc"), ("big", "size>1MiB")):
        path = folder / f"{name}.msgpack"
        export_snapshot(snapshot, path, filter_text, force=True)
        reopened = open_snapshot(path, cache=None)
        check_no_impossible_figure(reopened)
        for dev in reopened.devices:
            source = snapshot.devices[dev.device]
            for row in range(len(dev.trace)):
                i = dev.shown_index(row)
                assert source.event_address_n(i) == dev.event_address_n(row), f"{name}: event {i}"
                assert dev.trace.time_us[row] == source.trace.time_us[i] or np.isnan(source.trace.time_us[i])
            assert dev.time_origin_us == source.time_origin_us or np.isnan(source.time_origin_us)
            assert dev.partial_trace == (len(dev.trace) != len(source.trace))
        if any(dev.partial_trace for dev in reopened.devices):
            with pytest.raises(UsageError):
                convert_file(str(path), str(folder / f"{name}.pickle"), force=True)


@pytest.mark.parametrize("path", FILES)
def test_invariants_on_every_real_file(path, tmp_path):
    snapshot = cached(str(path))
    check_replay_ends_at_the_file(snapshot)
    check_no_impossible_figure(snapshot)
    check_labels_are_never_internal(snapshot)
    check_exports_keep_the_source(snapshot, tmp_path)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(allocator_snapshots())
def test_invariants_on_random_allocator_histories(raw):
    snapshot = build_model(normalize(raw, "random"))
    check_replay_ends_at_the_file(snapshot)
    check_no_impossible_figure(snapshot)
    check_labels_are_never_internal(snapshot)


def test_an_oom_event_without_a_stack_says_it_ran_under_backward():
    """The bundled demo's OOM was raised on the autograd engine's thread (stacks="python"
    records no frames there): every view says so and names the backward() call."""
    from tests.conftest import SAMPLES

    snapshot = cached(str(SAMPLES / "oom_training.pickle.xz"))
    dev = snapshot.devices[0]
    oom = int(dev.oom_indices()[-1])
    assert dev.trace.stack[oom] < 0
    label = snapshot.event_top_frame(0, oom)
    assert label.startswith("(backward) ")
    before = int(dev.last_stacked_before[oom])
    backward_call = snapshot.stacks.frames.label_text(int(snapshot.stacks.label[int(dev.trace.stack[before])]),
                                                      short=True)
    assert label == f"(backward) {backward_call}"
    assert int(dev.trace.action[before]) == act.ALLOC
