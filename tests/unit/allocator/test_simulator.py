"""The allocator model's rules on small, hand-made request streams."""

from memtui.allocator.addresses import AddressSpace
from memtui.allocator.settings import MB, AllocatorSettings, parse_conf
from memtui.allocator.simulator import SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, Simulator


def sim(conf: str = "", **kw) -> Simulator:
    return Simulator(parse_conf(conf), AddressSpace([], 1 << 40), **kw)


def test_small_requests_share_a_2mib_segment_and_merge_back():
    s = sim()
    a = s.malloc(1000, 0)
    b = s.malloc(1000, 0)
    assert s.events == [(SEGMENT_ALLOC, a.addr, 2 * MB)]
    assert b.addr == a.addr + 1024
    s.free(a)
    s.free(b)
    pool = s.pool(True, None)
    assert [blk.size for blk in pool.blocks.values()] == [2 * MB]  # merged into one free block again


def test_mid_sized_requests_split_a_20mib_segment():
    s = sim()
    a = s.malloc(3 * MB, 0)
    assert s.events[0][2] == 20 * MB
    b = s.malloc(3 * MB, 0)
    assert b.addr == a.addr + 3 * MB and len(s.events) == 1


def test_best_fit_is_per_stream():
    s = sim()
    a = s.malloc(3 * MB, 0)
    s.free(a)
    s.malloc(3 * MB, 1)  # the cached block belongs to stream 0
    assert len(s.events) == 2


def test_remainder_of_1mib_or_less_is_not_split_off_in_the_large_pool():
    s = sim()
    a = s.malloc(12 * MB, 0)
    s.free(a)
    b = s.malloc(11 * MB + 512 * 1024, 0)
    assert b.size == 12 * MB  # 512 KiB left over stays with the block


def test_oversize_blocks_are_not_split_nor_given_to_smaller_requests():
    s = sim("max_split_size_mb:64")
    big = s.malloc(100 * MB, 0)
    s.free(big)
    small = s.malloc(30 * MB, 0)
    assert small.addr != big.addr  # a new segment, the oversize one is not handed out
    s.free(small)
    again = s.malloc(90 * MB, 0)  # within the 20 MiB slack: the 100 MiB block, whole
    assert again.addr == big.addr and again.size == 100 * MB
    s.free(again)
    assert s.malloc(70 * MB, 0).addr != big.addr  # 30 MiB slack is too much


def test_pending_frees_wait_for_completion():
    s = sim()
    a = s.malloc(3 * MB, 0)
    s.free(a, pending=True)
    b = s.malloc(3 * MB, 0)
    assert b.addr != a.addr  # not reusable yet
    s.complete(a)
    s.free(b)
    assert s.malloc(3 * MB, 0).addr == a.addr


def test_out_of_memory_frees_the_cache_and_retries():
    s = sim(limit=40 * MB, per_process=True)
    a = s.malloc(20 * MB, 0)
    s.free(a)
    b = s.malloc(30 * MB, 0)  # no cached block fits; 20 + 30 > 40: release the cached 20, retry
    assert b is not None
    assert [e[0] for e in s.events] == [SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_ALLOC]
    assert s.malloc(30 * MB, 0) is None  # nothing left to release


def test_release_available_frees_only_enough_oversize_blocks():
    s = sim("max_split_size_mb:20", limit=120 * MB, per_process=True)
    blocks = [s.malloc(40 * MB, 0) for _ in range(3)]
    for b in blocks:
        s.free(b)
    assert s.malloc(60 * MB, 0) is not None
    frees = [e for e in s.events if e[0] == SEGMENT_FREE]
    assert len(frees) == 2  # two 40 MiB blocks cover 60 MiB; the third stays cached


def test_empty_cache_keeps_split_segments():
    s = sim()
    a = s.malloc(3 * MB, 0)
    b = s.malloc(30 * MB, 0)
    s.free(b)
    s.empty_cache()
    assert [e[0] for e in s.events] == [SEGMENT_ALLOC, SEGMENT_ALLOC, SEGMENT_FREE]
    assert s.reserved == 20 * MB and a.allocated


def test_expandable_segments_map_pages_and_unmap_free_ones():
    s = sim("expandable_segments:True")
    a = s.malloc(30 * MB, 0)
    assert s.events == [(SEGMENT_MAP, a.addr, 40 * MB)]  # 2 pages of 20 MiB
    b = s.malloc(30 * MB, 0)
    assert b.addr == a.addr + 30 * MB  # the same segment grows
    assert s.events[-1][0] == SEGMENT_MAP and s.reserved == 60 * MB
    s.free(b)
    s.empty_cache()
    assert s.events[-1][0] == SEGMENT_UNMAP and s.reserved == 40 * MB


def test_garbage_collection_needs_a_cap():
    settings = parse_conf("garbage_collection_threshold:0.5")
    s = Simulator(settings, AddressSpace([], 1 << 40), limit=100 * MB, per_process=True)
    olds = [s.malloc(20 * MB, 0) for _ in range(3)]
    for b in olds:
        s.free(b)
    s.malloc(30 * MB, 0)  # 60 reserved > 50: the collector frees cached blocks first
    assert any(e[0] == SEGMENT_FREE for e in s.events)
    no_cap = Simulator(settings, AddressSpace([], 1 << 40))
    for b in [no_cap.malloc(20 * MB, 0) for _ in range(3)]:
        no_cap.free(b)
    no_cap.malloc(30 * MB, 0)
    assert not any(e[0] == SEGMENT_FREE for e in no_cap.events)


def test_default_settings_object():
    assert AllocatorSettings().describe() == ""


def test_a_recorded_address_still_in_use_in_the_replay_is_not_handed_out_twice():
    # The recording freed its segment at A and got A back; a replay that kept the first segment
    # must place the second one elsewhere.
    a = 1 << 40
    space = AddressSpace([(a, 20 * MB), (a, 20 * MB)], a)
    first = space.malloc(20 * MB)
    second = space.malloc(20 * MB)
    assert first == a and second != a and not (a <= second < a + 20 * MB)
