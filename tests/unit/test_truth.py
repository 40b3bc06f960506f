"""`memtui info --json` agrees with the ground truth recorded with every real snapshot."""

from __future__ import annotations

import json

import pytest

from memtui.cli import main
from tests.conftest import shared_params, truth_for


def info_json(path, capsys) -> dict:
    assert main(["info", "--json", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def nonzero(states: dict) -> dict:
    return {k: v for k, v in states.items() if v}


@pytest.mark.shared
@pytest.mark.parametrize("path", shared_params("*.pickle*"))
def test_info_matches_truth(path, capsys):
    truth = truth_for(path)
    info = info_json(path, capsys)
    devices = info["devices"]
    assert len(devices) == truth["n_device_traces"]
    seg_devices = set(truth["devices_in_segments"])
    total = {"segments": 0, "blocks": 0, "reserved": 0, "allocated": 0, "active": 0}
    states: dict[str, int] = {}
    for dev in devices:
        for key in total:
            total[key] += dev[key]
        for k, v in dev["block_states"].items():
            states[k] = states.get(k, 0) + v
        if dev["segments"]:
            assert dev["device"] in seg_devices
    assert total == {"segments": truth["n_segments"], "blocks": truth["n_blocks"], "reserved": truth["reserved"],
                     "allocated": truth["allocated"], "active": truth["active"]}
    assert nonzero(states) == truth["block_states"]
    for dev, trace in zip(devices, truth["traces"]):
        assert dev["device"] == trace["device"]
        assert dev["trace"]["entries"] == trace["n_entries"]
        assert dev["trace"]["actions"] == trace["actions"]
        assert dev["trace"]["ooms"] == trace["ooms"]
    assert set(info["allocator_settings"]) >= {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments"}
