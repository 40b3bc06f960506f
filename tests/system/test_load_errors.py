"""Bad input: one clear line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pickle
import subprocess
import sys

import pytest

from memtui.cli import main
from memtui.errors import SnapshotError, UnsafeSnapshotError
from memtui.load.read import read_snapshot
from tests.fixtures import variants


def run_info(path, capsys) -> tuple[int, str]:
    code = main(["info", str(path)])
    err = capsys.readouterr().err
    return code, err


def assert_one_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memtui: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_missing_file(tmp_path, capsys):
    code, err = run_info(tmp_path / "nope.pickle", capsys)
    assert code == 2
    assert_one_line(err, "no such file")


def test_directory(tmp_path, capsys):
    code, err = run_info(tmp_path, capsys)
    assert code == 2
    assert_one_line(err, "is a directory")


def test_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.pickle"
    path.write_bytes(b"")
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "empty file")


def test_not_a_pickle(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is text and not a snapshot\n")
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "not a PyTorch memory snapshot")


def test_truncated_pickle(tmp_path, capsys):
    data = pickle.dumps(variants.modern(), protocol=4)
    path = tmp_path / "cut.pickle"
    path.write_bytes(data[: len(data) // 2])
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "truncated")


def test_wrong_shape_list_of_ints(tmp_path, capsys):
    path = tmp_path / "ints.pickle"
    path.write_bytes(pickle.dumps([1, 2, 3]))
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "not a memory snapshot", "int")


def test_wrong_shape_dict(tmp_path, capsys):
    path = tmp_path / "dict.pickle"
    path.write_bytes(pickle.dumps({"weights": [1.0]}))
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "no 'segments' or 'device_traces'")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_permission_denied_real(tmp_path, capsys):
    path = tmp_path / "secret.pickle"
    path.write_bytes(pickle.dumps(variants.modern()))
    path.chmod(0)
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "permission denied")


def test_permission_denied(tmp_path, capsys, monkeypatch):
    # Root ignores file modes, so the refusal is simulated at the system call.
    path = tmp_path / "secret.pickle"
    path.write_bytes(pickle.dumps(variants.modern()))
    real_open, real_os_open = open, os.open

    def refused(file) -> bool:
        return isinstance(file, (str, os.PathLike)) and os.fspath(file) == str(path)

    def deny(file, *args, **kwargs):
        if refused(file):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(file, *args, **kwargs)

    def deny_os(file, *args, **kwargs):
        if refused(file):
            raise PermissionError(13, "Permission denied", str(path))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", deny)
    monkeypatch.setattr("os.open", deny_os)
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "permission denied")


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress, bz2.compress], ids=["gzip", "xz", "bz2"])
def test_truncated_compressed(tmp_path, capsys, compress):
    data = compress(pickle.dumps(variants.modern(), protocol=4))
    path = tmp_path / "cut.pickle.z"
    path.write_bytes(data[: len(data) * 2 // 3])
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err)


class _Payload:
    """Pickles to a call of os.system that would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": _Payload(marker)}))
    # A fresh interpreter, as a user would run it.
    result = subprocess.run([sys.executable, "-m", "memtui", "info", str(path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert_one_line(result.stderr, "refused", "system")
    assert not marker.exists()
    # The TUI path refuses it the same way before taking over the terminal.
    with pytest.raises(UnsafeSnapshotError):
        read_snapshot(path)
    assert not marker.exists()


def test_hostile_global_names_are_refused(tmp_path):
    # A GLOBAL opcode naming builtins.eval, built by hand.
    path = tmp_path / "eval.pickle"
    path.write_bytes(b"cbuiltins\neval\n(S'1+1'\ntR.")
    with pytest.raises(UnsafeSnapshotError, match="builtins.eval"):
        read_snapshot(path)


def test_zstd_without_package_says_what_to_install(tmp_path, capsys, monkeypatch):
    path = tmp_path / "snap.pickle.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    code, err = run_info(path, capsys)
    assert code == 2
    assert_one_line(err, "pip install zstandard")


def test_errors_are_one_family():
    assert issubclass(UnsafeSnapshotError, SnapshotError)
