"""Before its indexes are built, the replayer finds a state near the last one asked for from
the lives the events between touch (memtui/replay.py, ``_open_lives``), not by a pass over
every life: the state is the indexed replayer's, array for array, on every real file."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from memtui.model.lifetimes import NONE
from memtui.replay import NEAR_EVENTS, Replayer
from tests.conftest import heldout_files, sample_files, shared_params
from tests.fixtures.opened import cached


def every_real_file():
    return (shared_params("*.pickle*") + [pytest.param(p, id=f"sample-{p.name}") for p in sample_files()]
            + [pytest.param(p, id=f"heldout-{p.parent.name}-{p.name}") for p in heldout_files()[:8]])


def _moves(n: int, rng: np.random.Generator) -> list[int]:
    """Where a user goes: the last event, a step back, a page, a jump near, the first ones."""
    at, moves = n - 1, [n - 1]
    for step in rng.choice([-1, -1, -1, 1, -30, 30, -NEAR_EVENTS, NEAR_EVENTS, -NEAR_EVENTS - 1], size=40):
        at = int(min(max(at + step, 0), n - 1))
        moves.append(at)
    return moves + [0, 1, 0, n - 1, n - 2]


def _same(a, b) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def _along_moves(path, seed: int, make_pair) -> list[Replayer]:
    """Each device's pair of replayers (``make_pair(dev)``) agreeing along a user's moves;
    the first of each pair, to be asked how it got there."""
    rng = np.random.default_rng(seed)
    firsts = []
    for dev in cached(str(path)).devices:
        if not len(dev.trace):
            continue
        first, second = make_pair(dev)
        for i in _moves(len(dev.trace), rng):
            _same(first.state_at(i), second.state_at(i))
        firsts.append(first)
    return firsts


@pytest.mark.parametrize("path", every_real_file())
def test_a_state_near_the_last_one_is_the_indexed_replayers(path):
    near = _along_moves(path, 7, lambda dev: (Replayer(dev, indexed=False), Replayer(dev, indexed=True)))
    assert not any(r.indexed for r in near)  # every state above came without the index


@pytest.mark.parametrize("path", every_real_file())
def test_a_life_opens_and_closes_at_its_own_events(path):
    # What the near path rests on: the event a life starts at, and the one it ends at, name it.
    for dev in cached(str(path)).devices:
        lives = dev.lives
        event_life = lives.event_life.astype(np.int64)
        ids = np.arange(len(lives))
        for column in (lives.start, lives.end):
            at = column.astype(np.int64)
            known = at != NONE
            assert np.array_equal(event_life[at[known]], ids[known])


def test_a_near_state_makes_no_pass_over_every_life(monkeypatch):
    # 8 ms at ten million events for each key that moved the cursor, until the index was built.
    dev = max(cached(str(sample_files()[0])).devices, key=lambda d: len(d.trace))
    n = len(dev.trace)
    replayer = Replayer(dev, indexed=False)
    replayer.state_at(n - 1)
    passes = []
    every_life = Replayer._open

    def noting(self, name, start, end, i):
        passes.append(name)
        return every_life(self, name, start, end, i)

    monkeypatch.setattr(Replayer, "_open", noting)
    for i in (n - 2, n - 3, n - 40, n - 1):
        replayer.state_at(i)
    assert "blocks" not in passes


def test_lives_sharing_an_address_keep_one_order_however_the_state_was_found(tmp_path):
    # A life begun before the trace (its free completes at 5) shares its address with one
    # that ended at 3: at event 1 both are open. The near path listed them the other way
    # round, and the map selects the first block at an address.
    import pickle

    from memtui.open import open_snapshot

    a = 0x7F0000000000

    def entry(action, addr, size, k):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1000 + k,
                "frames": [{"filename": "t.py", "line": 1, "name": "f"}]}

    trace = [entry("alloc", a, 512, 0), entry("segment_alloc", a, 2 << 20, 1), entry("free_requested", a, 512, 2),
             entry("free_completed", a, 512, 3), entry("alloc", a + 4096, 512, 4),
             entry("free_completed", a, 1024, 5), entry("alloc", a + 8192, 512, 6)]
    blocks = [{"address": a + 4096, "size": 512, "requested_size": 512, "state": "active_allocated", "frames": []},
              {"address": a + 8192, "size": 512, "requested_size": 512, "state": "active_allocated", "frames": []},
              {"address": a + 8704, "size": (2 << 20) - 8704, "requested_size": 0, "state": "inactive", "frames": []}]
    snap = {"segments": [{"device": 0, "address": a, "total_size": 2 << 20, "allocated_size": 1024, "active_size": 1024,
                          "requested_size": 1024, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                          "is_expandable": False, "frames": [], "blocks": blocks}],
            "device_traces": [trace], "allocator_settings": {}}
    path = tmp_path / "shared_address.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=4))
    dev = open_snapshot(path, cache=None).devices[0]
    near, indexed, full = Replayer(dev, indexed=False), Replayer(dev, indexed=True), Replayer(dev, indexed=False)
    near.state_at(4)
    found = [near.state_at(1), indexed.state_at(1), full.state_at(1)]
    assert len(found[0].blk_life) >= 2
    for state in found[1:]:
        _same(found[0], state)


@pytest.mark.parametrize("path", every_real_file())
def test_a_state_takes_its_open_lives_bytes_alone(path):
    # The first screen's state came with a column of every life's bytes and of its final
    # block (26 MB each at 10M events); now each state works out those of its open lives.
    def pair(dev):
        whole = Replayer(dev, indexed=False)
        whole.life_bytes  # noqa: B018 - the column made first: its states take their bytes from it
        return Replayer(dev, indexed=False), whole

    alone = _along_moves(path, 11, pair)
    assert not any("life_bytes" in r.__dict__ for r in alone)


def test_the_replayer_reads_the_action_counts_not_the_actions(monkeypatch):
    # Whether a trace maps or unmaps ranges, and whether it has segment events at all, was
    # a pass over every action code (20-30 ms at 10M events); the trace's counts say it.
    from memtui.model import actions as act
    from tests.conftest import SAMPLES

    dev = cached(str(SAMPLES / "oom_training.pickle.xz")).devices[0]
    dev._action_counts  # noqa: B018 - made (a warm open reads them from the cache)

    def no_pass(*args, **kwargs):
        raise AssertionError("a pass over the action codes")
    monkeypatch.setattr(act, "one_of", no_pass)
    monkeypatch.setattr(act, "any_of", no_pass)
    Replayer(dev, indexed=False).state_at(len(dev.trace) - 1)


@pytest.mark.parametrize("path", every_real_file())
def test_each_lifes_final_block_is_the_one_the_block_table_names(path):
    # Found by a search of the few lives that are a block at the end, where a column of every
    # life was written (the later block where two name one life, as that column's writes gave).
    for dev in cached(str(path)).devices:
        column = np.full(len(dev.lives), NONE, np.int64)
        linked = np.nonzero(dev.block_life != NONE)[0]
        column[dev.block_life[linked]] = linked
        every = np.arange(len(dev.lives), dtype=np.int64)
        assert np.array_equal(Replayer(dev, indexed=False)._final_of(every), column)
