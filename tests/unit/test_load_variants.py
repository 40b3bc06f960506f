"""Every known snapshot variant normalizes to the same model shape."""

from __future__ import annotations

import bz2
import gzip
import lzma
import pickle

import numpy as np
import pytest

from memtui.model import actions as act
from memtui.model import build_model
from memtui.model.segments import PENDING_FREE
from memtui.open import open_snapshot
from tests.conftest import sample_files
from tests.fixtures import variants


def write(tmp_path, obj, name="snap.pickle", protocol=4, compress=None):
    data = pickle.dumps(obj, protocol=protocol)
    if compress:
        data = compress(data)
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_modern_layout(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.modern()))
    dev = snap.devices[0]
    assert len(dev.segments) == 1 and len(dev.blocks) == 2
    assert dev.allocated == 1 << 20
    # The second alloc at the segment base is that address's first life; the earlier
    # alloc at base+1MiB was freed, so a new one there would be _1.
    assert dev.event_address_n(1) == f"{0x7F0000000000 + (1 << 20):x}_0"
    assert dev.event_address_n(3) == f"{0x7F0000000000 + (1 << 20):x}_0"
    assert dev.event_address_n(4) == "7f0000000000_0"
    assert dev.block_address_n(0) == "7f0000000000_0"


def test_torch20_history_blocks(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.torch20_history()))
    dev = snap.devices[0]
    assert dev.blocks.state[0] == PENDING_FREE
    assert int(dev.blocks.requested_size[0]) == (1 << 20) - 100
    assert snap.stacks.frame_ids(int(dev.blocks.stack[0])).size == 1
    assert np.isnan(dev.trace.time_us).all()
    # C++ frames are kept, first, and hidden by default.
    sid = int(dev.trace.stack[0])
    assert snap.frames.describe(int(snap.stacks.frame_ids(sid)[0])).endswith("torch::unwind::unwind()")
    visible = snap.stacks.visible_frames(sid)
    assert all(not snap.frames.native[f] for f in visible)


def test_bare_segment_list(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.bare_segment_list()))
    assert len(snap.devices) == 1
    assert len(snap.devices[0].trace) == 0
    assert snap.devices[0].reserved == 2 << 20


def test_missing_optional_keys(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.missing_optional_keys()))
    assert (snap.devices[0].trace.stack == -1).all()


def test_unknown_action_is_kept(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.unknown_action()))
    dev = snap.devices[0]
    assert dev.action_counts(snap.actions.names)["future_thing"] == 1
    assert snap.actions.name(int(dev.trace.action[2])) == "future_thing"


def test_huge_addresses_stay_exact(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.huge_addresses()))
    dev = snap.devices[0]
    big = (1 << 70) + 0x1000
    assert int(dev.segments.address[0]) == big
    assert dev.block_address_n(0) == f"{big:x}_0"
    assert snap.find(f"{big:x}_0")[0].block == 0


def test_empty_device_traces(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.empty_traces()))
    assert len(snap.devices) == 1 and len(snap.devices[0].trace) == 0


def test_two_devices(tmp_path):
    snap = open_snapshot(write(tmp_path, variants.two_devices()))
    assert [len(d.segments) for d in snap.devices] == [1, 1]


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_all_pickle_protocols(tmp_path, protocol):
    snap = open_snapshot(write(tmp_path, variants.modern(), protocol=protocol))
    assert len(snap.devices[0].trace) == 5


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress, bz2.compress, None],
                         ids=["gzip", "xz", "bz2", "plain"])
def test_compression_by_magic_bytes(tmp_path, compress):
    # The name says nothing: compression is recognised from the content.
    snap = open_snapshot(write(tmp_path, variants.modern(), name="snapshot.bin", compress=compress))
    assert len(snap.devices[0].trace) == 5


def test_zstd(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    path = write(tmp_path, variants.modern(), compress=zstandard.ZstdCompressor().compress)
    assert len(open_snapshot(path).devices[0].trace) == 5


def test_build_model_releases_entry_dicts():
    raw = variants.modern()
    build_model(raw)
    assert raw["device_traces"] == [[]]


@pytest.mark.parametrize("path", sample_files() or [None], ids=lambda p: p.name if p else "none")
def test_samples_load(path):
    if path is None:
        pytest.skip("no samples")
    snap = open_snapshot(path)
    assert snap.devices
    for dev in snap.devices:
        codes = set(np.unique(dev.trace.action).tolist())
        assert codes <= set(range(len(snap.actions.names)))
    assert act.ALLOC == 0
