"""The torch probe's reading of the allocator, against a stand-in for torch's counters."""

from __future__ import annotations

import types

from memtui.record.serving import TorchProbe


def fake_torch(reserved_by_device: dict[int, int], fraction: float = 1.0, nested: bool = True):
    def nested_stats(d):
        r = reserved_by_device.get(d, 0)
        return {"allocated_bytes": {"all": {"current": r // 2, "peak": r}},
                "reserved_bytes": {"all": {"current": r}}, "active_bytes": {"all": {"current": r // 2 + 1}},
                "num_ooms": 3, "num_alloc_retries": 1}

    def flat_stats(d):
        out = {}
        for key, value in nested_stats(d).items():
            if isinstance(value, dict):
                for sub, figures in value.items():
                    for name, number in figures.items():
                        out[f"{key}.{sub}.{name}"] = number
            else:
                out[key] = value
        return out

    asked = []

    def mem_get_info(d):
        asked.append(d)
        return (10 << 30, 80 << 30)

    cuda = types.SimpleNamespace(memory_stats=flat_stats, device_count=lambda: 4, mem_get_info=mem_get_info,
                                 get_per_process_memory_fraction=lambda d: fraction)
    torch = types.SimpleNamespace(cuda=cuda, _C=types.SimpleNamespace(**({"_cuda_memoryStats": nested_stats}
                                                                         if nested else {})))
    return torch, asked


def test_counters_come_from_the_nested_stats_or_the_flat_ones_alike():
    for nested in (True, False):
        torch, asked = fake_torch({1: 4 << 30, 3: 2 << 30}, nested=nested)
        rows = TorchProbe(torch, home_device=1).counters()
        assert [r["device"] for r in rows] == [1, 3]  # the home device, then any other holding memory
        assert asked == [1, 3]  # device 0 and 2 are never asked (no CUDA context is made there)
        home = rows[0]
        assert (home["allocated"], home["reserved"], home["active"], home["peak_allocated"]) == (
            2 << 30, 4 << 30, (2 << 30) + 1, 4 << 30)
        assert (home["ooms"], home["retries"]) == (3, 1)
        assert home["limit"] == (4 << 30) + (10 << 30) and home["device_total"] == 80 << 30


def test_a_per_process_cap_bounds_the_limit():
    torch, _ = fake_torch({0: 1 << 30}, fraction=0.05)
    row = TorchProbe(torch, home_device=0).counters()[0]
    assert row["limit"] == int((80 << 30) * 0.05)


def test_the_segments_alone_come_from_a_snapshot_without_its_trace_or_not_at_all():
    asked = []

    def memory_snapshot(arg):
        asked.append(arg)
        if len(arg) != 3:
            raise RuntimeError("mempool_id must be a tuple of 2 integers")
        return {"segments": [{"address": 1, "blocks": []}], "device_traces": []}

    torch, _ = fake_torch({0: 1 << 30})
    torch._C._cuda_memorySnapshot = memory_snapshot
    probe = TorchProbe(torch, home_device=0)
    assert probe.segments() == [{"address": 1, "blocks": []}]
    assert asked == [(0, 0, False)]  # every pool, no trace

    def older(arg):  # a torch before include_traces refuses the triple
        raise RuntimeError("mempool_id must be a tuple of 2 integers")

    torch._C._cuda_memorySnapshot = older
    probe = TorchProbe(torch, home_device=0)
    assert probe.segments() is None and probe.segments() is None
    del torch._C._cuda_memorySnapshot
    assert TorchProbe(torch, home_device=0).segments() is None
