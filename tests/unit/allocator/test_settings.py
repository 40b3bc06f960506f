"""PYTORCH_CUDA_ALLOC_CONF parsing and size rounding, as torch does them."""

import pytest

from memtui.allocator.settings import MB, NO_LIMIT, AllocatorSettings, parse_conf, settings_of_snapshot
from memtui.allocator.simulator import allocation_size, round_size
from memtui.errors import UsageError


def test_defaults():
    for text in ("", "default", "  "):
        assert parse_conf(text) == AllocatorSettings()
    assert AllocatorSettings().max_split_size == NO_LIMIT


def test_max_split_size_is_raised_to_the_large_segment_size():
    assert parse_conf("max_split_size_mb:64").max_split_size == 64 * MB
    assert parse_conf("max_split_size_mb:8").max_split_size == 20 * MB


def test_roundup_single_and_per_range():
    assert parse_conf("roundup_power2_divisions:4").roundup_power2_divisions == (4,) * 16
    ranges = parse_conf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]")
    # The first range also covers every size below it; ">" every range after the last one named.
    assert ranges.divisions_for(32 * MB) == 8
    assert ranges.divisions_for(64 * MB) == 8
    assert ranges.divisions_for(128 * MB) == 2
    assert ranges.divisions_for(256 * MB) == 4
    assert ranges.divisions_for(1024 * MB) == 4
    assert ranges.divisions_for(4096 * MB) == 1


def test_round_size_matches_torchs_examples():
    four = parse_conf("roundup_power2_divisions:4")
    assert round_size(1, AllocatorSettings()) == 512
    assert round_size(513, AllocatorSettings()) == 1024
    assert round_size(1200, AllocatorSettings()) == 1536
    # torch's comment: 1200 with 4 divisions lies between 1024 and 2048 -> 1280; but sizes up
    # to 512 x divisions still round to 512 only.
    assert round_size(1200, four) == 1536
    assert round_size(1200 * MB, four) == 1280 * MB
    assert round_size(1024 * MB, four) == 1024 * MB
    assert round_size(1025 * MB, parse_conf("roundup_power2_divisions:2")) == 1536 * MB


def test_allocation_sizes():
    assert allocation_size(512) == 2 * MB
    assert allocation_size(MB) == 2 * MB
    assert allocation_size(MB + 512) == 20 * MB
    assert allocation_size(10 * MB - 512) == 20 * MB
    assert allocation_size(10 * MB) == 10 * MB
    assert allocation_size(11 * MB + 1) == 12 * MB


@pytest.mark.parametrize("bad", ["bogus:1", "max_split_size_mb:x", "garbage_collection_threshold:1.5",
                                 "expandable_segments:maybe", "roundup_power2_divisions:3", "max_split_size_mb",
                                 "backend:cudaMallocAsync", "roundup_power2_divisions:[64:8"])
def test_bad_settings_are_one_usage_error(bad):
    with pytest.raises(UsageError):
        parse_conf(bad)


def test_settings_of_a_snapshot_prefer_the_parsed_fields():
    conf, settings = settings_of_snapshot({"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": True,
                                           "max_split_size": 64 * MB})
    assert conf == ""
    assert settings.expandable_segments and settings.max_split_size == 64 * MB


def test_describe_round_trips():
    for text in ("max_split_size_mb:64,expandable_segments:True", "roundup_power2_divisions:4",
                 "garbage_collection_threshold:0.6,max_split_size_mb:128"):
        settings = parse_conf(text)
        assert parse_conf(settings.describe()) == settings
