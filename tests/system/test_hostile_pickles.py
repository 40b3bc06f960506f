"""Pickles that try to run code are refused by the name of what they import, and nothing runs.

Each family of payload (os.system, subprocess.Popen, builtins.eval, the __reduce__ of
any class, torch's and numpy's reconstructors, persistent ids, the extension registry)
is tried where the header walk of the streaming decoder meets it (before the first trace
entry) and where its unpickler does (inside the trace), through the plain path, the
streaming path in this process and the streaming path's helper process. If any payload
ran, it would create a marker file.
"""

from __future__ import annotations

import copyreg
import os
import pickle
import subprocess
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import memtui.load.stream as stream_module
from memtui.cli import main
from memtui.errors import UnsafeSnapshotError
from memtui.load.read import read_snapshot
from memtui.load.stream import StreamFallback, stream_snapshot
from memtui.model.frames import StackToken
from memtui.model.trace import ModelTables, TraceBuilder
from memtui.open import open_snapshot
from tests.conftest import ROOT, SHARED
from tests.fixtures import variants


class Calls:
    """Pickles to ``function(*args)``: whatever the unpickler would call to rebuild it."""

    def __init__(self, function, *args) -> None:
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


class Harmless:
    """Any class at all: rebuilding an instance needs the class, a global, so it is refused."""

    def __init__(self) -> None:
        self.value = 1


@contextmanager
def fake_global(module: str, name: str, marker: Path):
    """A module ``module`` with a function ``name`` that creates ``marker`` if called, so a
    pickle naming e.g. ``torch._utils._rebuild_tensor_v2`` can be made without torch."""
    created = []
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        dotted = ".".join(parts[:i])
        if dotted not in sys.modules:
            sys.modules[dotted] = types.ModuleType(dotted)
            created.append(dotted)

    def payload(*args):
        marker.touch()

    payload.__module__, payload.__qualname__, payload.__name__ = module, name, name
    missing = object()
    previous = getattr(sys.modules[module], name, missing)  # the real one, when torch is installed
    setattr(sys.modules[module], name, payload)
    try:
        yield payload
    finally:
        if previous is missing:
            delattr(sys.modules[module], name)
        else:
            setattr(sys.modules[module], name, previous)
        for dotted in created:
            del sys.modules[dotted]


def payloads(marker: Path) -> dict:
    """name → (object to pickle, text the refusal must name, extra context manager or None)."""
    return {
        "os.system": (Calls(os.system, f"touch {marker}"), "system", None),
        "subprocess.Popen": (Calls(subprocess.Popen, ["touch", str(marker)]), "subprocess.Popen", None),
        "builtins.eval": (Calls(eval, f"open({str(marker)!r}, 'w').close()"), "builtins.eval", None),
        "any class __reduce__": (Harmless(), "Harmless", None),
        "torch rebuild": (None, "torch._utils._rebuild_tensor_v2", ("torch._utils", "_rebuild_tensor_v2")),
        "torch storage": (None, "torch.storage._load_from_bytes", ("torch.storage", "_load_from_bytes")),
        "numpy reconstruct": (np.arange(3), "_reconstruct", None),
    }


def hostile_snapshot(payload: object, inside_trace: bool) -> dict:
    snap = variants.modern()
    if inside_trace:  # past the first entry: the streaming unpickler itself meets the global
        snap["device_traces"][0][2]["frames"] = [payload]
    else:
        snap["external_annotations"] = [payload]
    return snap


def write_payload(tmp_path: Path, family: str, inside_trace: bool, protocol: int = 4) -> tuple[Path, Path, str]:
    marker = tmp_path / "pwned"
    obj, named, fake = payloads(marker)[family]
    path = tmp_path / f"hostile-{protocol}.pickle"
    if fake is not None:
        with fake_global(*fake, marker) as function:
            path.write_bytes(pickle.dumps(hostile_snapshot(Calls(function, 1), inside_trace), protocol=protocol))
    else:
        path.write_bytes(pickle.dumps(hostile_snapshot(obj, inside_trace), protocol=protocol))
    return path, marker, named


FAMILIES = list(payloads(Path("x")))


def streaming_helper_process(monkeypatch) -> None:
    monkeypatch.setattr(stream_module, "HELPER_PROCESS_MIN_BYTES", 0)


def open_plain(path):
    return open_snapshot(path, streaming=False, cache=None)


def open_streaming(path):
    return open_snapshot(path, streaming=True, cache=None)


@pytest.mark.parametrize("inside_trace", [False, True], ids=["before-trace", "inside-trace"])
@pytest.mark.parametrize("family", FAMILIES)
def test_refused_by_name_on_every_path(tmp_path, monkeypatch, family, inside_trace):
    path, marker, named = write_payload(tmp_path, family, inside_trace)
    for load in (read_snapshot, open_plain, open_streaming):
        with pytest.raises(UnsafeSnapshotError, match="refused") as refused:
            load(path)
        assert named in str(refused.value) and "nothing was run" in str(refused.value)
    if inside_trace:
        # The streaming decoder's own unpickler refuses it before the plain path reads the file.
        tables = ModelTables.new()
        with pytest.raises(StreamFallback, match=f"UnsafeSnapshotError: refused.*{named.split('.')[-1]}"):
            stream_snapshot(path, lambda n: TraceBuilder(tables, f"device {n}", strict=True), StackToken)
        streaming_helper_process(monkeypatch)
        with pytest.raises(UnsafeSnapshotError, match=named.split(".")[-1]):
            open_streaming(path)
    assert not marker.exists()


@pytest.mark.parametrize("family", FAMILIES)
def test_cli_exits_2_with_one_line(tmp_path, capsys, family):
    path, marker, named = write_payload(tmp_path, family, inside_trace=True)
    assert main(["info", "--no-cache", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("memtui: ") and "refused" in err[0] and named in err[0]
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_refused_at_every_protocol(tmp_path, protocol):
    path, marker, named = write_payload(tmp_path, "os.system", inside_trace=True, protocol=protocol)
    for load in (open_plain, open_streaming):
        with pytest.raises(UnsafeSnapshotError, match="system"):
            load(path)
    assert not marker.exists()


def test_persistent_ids_are_refused(tmp_path):
    class WithIds(pickle.Pickler):
        def persistent_id(self, obj):
            return "storage-0" if isinstance(obj, Harmless) else None

    path = tmp_path / "persid.pickle"
    with open(path, "wb") as fh:
        WithIds(fh, protocol=2).dump(hostile_snapshot(Harmless(), inside_trace=True))
    for load in (open_plain, open_streaming):
        with pytest.raises(UnsafeSnapshotError, match="persistent ids"):
            load(path)


def test_extension_registry_codes_are_refused(tmp_path):
    # EXT1 names a global through copyreg's registry; the name is refused all the same.
    marker = tmp_path / "pwned"
    copyreg.add_extension("posix" if os.name == "posix" else "nt", "system", 0xF1)
    try:
        path = tmp_path / "ext.pickle"
        path.write_bytes(pickle.dumps(hostile_snapshot(Calls(os.system, f"touch {marker}"), True), protocol=2))
        assert b"\x82\xf1" in path.read_bytes()
        for load in (open_plain, open_streaming):
            with pytest.raises(UnsafeSnapshotError, match="system"):
                load(path)
    finally:
        copyreg.remove_extension("posix" if os.name == "posix" else "nt", "system", 0xF1)
    assert not marker.exists()


def test_a_hostile_global_name_cannot_inject_escape_sequences(tmp_path):
    path = tmp_path / "ansi-global.pickle"
    path.write_bytes(b"\x80\x02c\x1b]0;pwned\x07os\nsystem\nq\x00.")
    result = subprocess.run([sys.executable, "-m", "memtui", "info", "--no-cache", str(path)], capture_output=True,
                            timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 2
    assert b"\x1b" not in result.stderr and b"\\x1b]0;pwned\\x07os.system" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def real_snapshot() -> dict:
    source = SHARED / "train_linear_adam.pickle"
    if not source.exists():
        pytest.skip(f"no real snapshot at {source}")
    from memtui.load.safe_pickle import safe_load

    with open(source, "rb") as fh:
        return safe_load(fh, source.name)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_a_real_file_repickled_at_every_protocol_loads_the_same(tmp_path, protocol):
    from memtui.services.info import summarize

    raw = real_snapshot()
    reference = summarize(open_snapshot(SHARED / "train_linear_adam.pickle", cache=None))
    path = tmp_path / f"p{protocol}.pickle"
    path.write_bytes(pickle.dumps(raw, protocol=protocol))
    for load in (open_plain, open_streaming):
        summary = summarize(load(path))
        assert {k: v for k, v in summary.items() if k not in ("file", "file_size")} == \
            {k: v for k, v in reference.items() if k not in ("file", "file_size")}
