"""One rule for the device every view opens: the one with an OOM, else the most events,
else the most reserved bytes; ``--device`` always wins. Checked on several-device files
combined from real recordings (tests/fixtures/multi_device.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memtui.errors import UsageError
from memtui.open import open_snapshot
from tests.conftest import SAMPLES
from tests.fixtures.multi_device import combine

HEALTHY = SAMPLES / "train_linear_adam.pickle.xz"
OOM = SAMPLES / "oom_training.pickle.xz"


def memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui", "--no-cache", *args], capture_output=True, text=True,
                          timeout=120)


def json_of(*args: str):
    done = memtui(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    """Device 0 busy and healthy, the OOM on device 1, devices 2 and 3 idle."""
    return combine([HEALTHY, OOM, None, None], tmp_path_factory.mktemp("multi") / "four.pickle")


@pytest.fixture(scope="module")
def idle_device0(tmp_path_factory):
    """Device 0 holds only the dump's snapshot entry; everything is on device 1."""
    return combine([None, HEALTHY], tmp_path_factory.mktemp("multi") / "idle0.pickle")


def test_the_device_with_the_oom_is_the_default(four_devices):
    snapshot = open_snapshot(four_devices, cache=None)
    assert [d.device for d in snapshot.present_devices] == [0, 1, 2, 3]
    assert snapshot.default_device() == 1
    assert snapshot.device_or_default(0) == 0
    with pytest.raises(UsageError):
        snapshot.device_or_default(7)


def test_every_command_looks_at_the_default_device(four_devices):
    path = str(four_devices)
    assert json_of("leaks", path)["device"] == 1
    assert json_of("cycles", path)["device"] == 1
    oom = json_of("oom", path)
    assert oom["device"] == 1 and {d["device"] for d in oom["ooms"]} == {1}
    events = json_of("events", path, "--start", "-1")
    assert events[-1]["action"] in ("oom", "snapshot")
    assert len(json_of("events", path, "--limit", "0")) == len(open_snapshot(OOM, cache=None).devices[0].trace)
    assert json_of("leaks", path, "--device", "0")["device"] == 0  # --device wins


def test_an_idle_device_0_does_not_hide_device_1(idle_device0):
    leaks = json_of("leaks", str(idle_device0))
    assert leaks["device"] == 1 and leaks["live_bytes"] > 0


def test_a_bare_segment_list_has_no_phantom_device_0(tmp_path):
    path = combine([None, HEALTHY], tmp_path / "bare.pickle", with_traces=False)
    snapshot = open_snapshot(path, cache=None)
    assert [d.device for d in snapshot.present_devices] == [1]
    info = json_of("info", str(path))
    assert [d["device"] for d in info["devices"]] == [1]
    assert json_of("leaks", str(path))["device"] == 1


def test_diff_compares_each_ranks_own_device():
    """rank 1 of a DDP run works on device 1; its device 0 is empty. Each side of a diff
    takes its own default device, so the comparison is of the data, not of an empty device."""
    rank0, rank1 = SAMPLES / "ranks" / "ddp_train.rank0.pickle.xz", SAMPLES / "ranks" / "ddp_train.rank1.pickle.xz"
    assert open_snapshot(rank1, cache=None).default_device() == 1
    diff = json_of("diff", str(rank0), str(rank1))
    assert diff["a"]["device"] == 0 and diff["b"]["device"] == 1
    assert diff["sites"], "a diff of the two ranks' data finds sites on both sides"
