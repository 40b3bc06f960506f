"""Recording without a GPU: argument parsing, file naming and writing, the no-torch and
no-CUDA messages, and ``memtui run`` end to end against a stand-in torch.

The stand-in (FAKE_TORCH below) implements just the calls memtui.record makes, so the
runner's flow (argv, ``__main__``, exit status, OOM dump, step ranges, rank names) is
tested on any machine. The real thing is tested in tests/gpu on a CUDA GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memtui.errors import MemtuiError, UsageError
from memtui.load.read import read_snapshot
from memtui.open import open_snapshot
from memtui.record import files
from memtui.record.steps import parse_steps

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------
# --steps and the command line


@pytest.mark.parametrize(
    "text, expected",
    [("5:8", (5, 8)), ("0:1", (0, 1)), (" 2 : 10 ", (2, 10)), ("3:", (3, None)), (":4", (0, 4)), ("7", (7, 8))],
)
def test_parse_steps(text, expected):
    assert parse_steps(text) == expected


@pytest.mark.parametrize("text", ["", "a:b", "5:5", "8:5", "-1:3", "1:2:3", "1.5:3"])
def test_parse_steps_rejects(text):
    with pytest.raises(UsageError) as err:
        parse_steps(text)
    assert "--steps" in err.value.message and "\n" not in err.value.message


def run_parser() -> argparse.ArgumentParser:
    from memtui.commands import run

    parser = argparse.ArgumentParser(prog="memtui run")
    run.add_arguments(parser)
    return parser


def test_run_arguments_defaults():
    from memtui.commands.run import split_command

    args = run_parser().parse_args(["train.py"])
    assert (args.out, args.max_entries, args.stacks, args.context, args.steps, args.on_oom_only) == (
        ".", 100_000, "python", "all", None, False,
    )
    assert split_command(args.command) == ("train.py", [])


def test_run_arguments_all_flags_and_script_args_pass_through():
    from memtui.commands.run import split_command

    argv = ["--out", "d", "--max-entries", "50", "--stacks", "all", "--context", "alloc", "--steps", "2:4",
            "--on-oom-only", "train.py", "--out", "x", "-h", "--", "--steps"]
    args = run_parser().parse_args(argv)
    assert (args.out, args.max_entries, args.stacks, args.context, args.steps, args.on_oom_only) == (
        "d", 50, "all", "alloc", "2:4", True,
    )
    # Everything after the script is the script's, `--` included.
    assert split_command(args.command) == ("train.py", ["--out", "x", "-h", "--", "--steps"])


def test_run_arguments_leading_double_dash_and_missing_script():
    from memtui.commands.run import split_command

    assert split_command(run_parser().parse_args(["--", "t.py", "a"]).command) == ("t.py", ["a"])
    with pytest.raises(UsageError, match="needs a script"):
        split_command([])


@pytest.mark.parametrize(
    "argv", [["--max-entries", "0", "t.py"], ["--stacks", "cpp", "t.py"], ["--context", "x", "t.py"]]
)
def test_run_arguments_rejects(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        run_parser().parse_args(argv)
    assert exc.value.code == 2


# ---------------------------------------------------------------------------------------
# File names, compression and atomic writes


def test_compression_and_suffixes():
    assert files.compression_for("a.pickle") is None
    assert files.compression_for("a.pickle.xz") == "xz"
    assert files.compression_for("a.pickle.GZ") == "gzip"
    assert files.compression_for("a.pickle.bz2") == "bz2"
    assert files.split_snapshot_suffix("d/run.pickle.xz") == ("d/run", ".pickle.xz")
    assert files.split_snapshot_suffix("run.pkl") == ("run", ".pkl")
    assert files.split_snapshot_suffix("run") == ("run", "")
    assert files.with_tag("d/run.pickle.gz", "oom") == "d/run.oom.pickle.gz"


@pytest.mark.parametrize(
    "env, path, expected",
    [
        ({}, "out/run.pickle", "out/run.pickle"),
        ({"RANK": "3", "LOCAL_RANK": "1"}, "out/run.pickle.xz", "out/run.rank3.pickle.xz"),
        ({"LOCAL_RANK": "1"}, "run.pickle", "run.rank1.pickle"),
        ({"RANK": "2"}, "r{rank}/run.pickle", "r2/run.pickle"),
        ({}, "run-{rank}.pickle", "run-0.pickle"),
        ({"RANK": "junk"}, "run.pickle", "run.pickle"),
    ],
)
def test_rank_path(env, path, expected):
    assert files.rank_path(path, env) == expected


FAKE_SNAPSHOT = {
    "segments": [
        {
            "device": 0, "address": 0x7F0000000000, "total_size": 2 << 20, "allocated_size": 1 << 20,
            "active_size": 1 << 20, "requested_size": 1 << 20, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [
                {"address": 0x7F0000000000, "size": 1 << 20, "requested_size": 1 << 20, "state": "active_allocated",
                 "frames": [{"filename": "train.py", "line": 3, "name": "<module>"}]},
                {"address": 0x7F0000100000, "size": 1 << 20, "requested_size": 0, "state": "inactive", "frames": []},
            ],
        }
    ],
    "device_traces": [[
        {"action": "segment_alloc", "addr": 0x7F0000000000, "size": 2 << 20, "stream": 0, "time_us": 1,
         "compile_context": "N/A", "user_metadata": "", "frames": []},
        {"action": "alloc", "addr": 0x7F0000000000, "size": 1 << 20, "stream": 0, "time_us": 2,
         "compile_context": "N/A", "user_metadata": "memtui.step#0", "frames": []},
    ]],
    "allocator_settings": {"expandable_segments": False},
    "external_annotations": [{"stage": "START", "name": "memtui.step#0", "device": 0, "time_us": 1}],
}

OPENERS = {".pickle": open, ".pickle.xz": lzma.open, ".pickle.gz": gzip.open}


@pytest.mark.parametrize("suffix", [".pickle", ".pickle.xz", ".pickle.gz", ".pickle.bz2"])
def test_write_snapshot_round_trip(tmp_path, suffix):
    target = tmp_path / "new" / f"snap{suffix}"  # the directory does not exist yet
    written = files.write_snapshot(FAKE_SNAPSHOT, target)
    assert written == str(target.resolve())
    assert read_snapshot(target)["device_traces"][0][1]["user_metadata"] == "memtui.step#0"
    assert len(open_snapshot(target).devices[0].trace) == 2
    if suffix in OPENERS:
        with OPENERS[suffix](target, "rb") as fh:
            head = fh.read(2)
        assert head == b"\x80\x04"  # protocol 4, as torch writes and memory_viz reads
    assert os.listdir(target.parent) == [target.name]  # no temporary file left behind


def test_write_snapshot_keeps_shared_objects_shared(tmp_path):
    frame = {"filename": "f.py", "line": 1, "name": "g"}
    snap = {"segments": [], "device_traces": [[{"frames": [frame]}, {"frames": [frame]}]]}
    files.write_snapshot(snap, tmp_path / "s.pickle")
    with open(tmp_path / "s.pickle", "rb") as fh:
        back = pickle.load(fh)
    a, b = back["device_traces"][0]
    assert a["frames"][0] is b["frames"][0]


def test_atomic_write_failure_keeps_the_old_file(tmp_path):
    target = tmp_path / "snap.pickle"
    target.write_bytes(b"old")

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        files.write_snapshot({"segments": [Unpicklable()]}, target)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["snap.pickle"]


def test_written_file_follows_umask(tmp_path):
    files.write_snapshot(FAKE_SNAPSHOT, tmp_path / "s.pickle")
    mode = os.stat(tmp_path / "s.pickle").st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


# ---------------------------------------------------------------------------------------
# Without torch, and importing without torch


def python(code: str, *, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in [full_env.get("PYTHONPATH", ""), str(ROOT)] if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, cwd=cwd,
                          timeout=120)


NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def test_memtui_run_without_torch_says_how_to_install(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("print('must not run')\n")
    done = python(NO_TORCH + f"from memtui.cli import main; sys.exit(main(['run', {str(script)!r}]))")
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'memtui[record]'" in lines[0], done.stderr


def test_python_api_without_torch_raises_one_line():
    code = NO_TORCH + textwrap.dedent("""
        import memtui
        from memtui.errors import MissingDependencyError
        for call in (lambda: memtui.record('x.pickle').start(), memtui.record.step,
                     lambda: memtui.record.on_oom('o.pickle')):
            try:
                call()
            except MissingDependencyError as exc:
                print(exc.message)
    """)
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("pip install 'memtui[record]'") == 3


def test_importing_memtui_never_imports_torch_or_textual():
    code = textwrap.dedent("""
        import sys
        import memtui, memtui.cli, memtui.record, memtui.commands.run, memtui.record.runner
        memtui.cli.command_modules()
        assert callable(memtui.record) and callable(memtui.record.step) and memtui.record.Stepper
        print(sorted(m for m in ("torch", "textual") if m in sys.modules))
    """)
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------
# A stand-in torch: records calls, keeps a trace, calls the OOM observers.

FAKE_TORCH = '''
"""Stand-in for torch: only what memtui.record uses."""
import os
import sys
import time
import types

__version__ = "0.0+fake"
version = types.SimpleNamespace(cuda=None if os.environ.get("FAKE_TORCH_BUILD") == "cpu" else "12.4")
_state = {"enabled": False, "trace": [], "annotations": [], "metadata": "", "observers": [], "next": 0x7F0000000000,
          "initialized": False, "allocator": False}


def _now():
    return int(time.time() * 1e6)


def _event(action, **fields):
    if _state["enabled"]:
        entry = {"action": action, "stream": 0, "time_us": _now(), "compile_context": "N/A",
                 "user_metadata": _state["metadata"], "frames": []}
        entry.update(fields)
        _state["trace"].append(entry)


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False):
    _state["enabled"] = enabled is not None
    _state["allocator"] = True  # C++ only: torch.cuda.is_initialized() stays False, as in torch
    if enabled is not None:
        log = os.environ.get("FAKE_TORCH_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{context} {stacks} {max_entries} {global_record_annotations}\\n")


def _snapshot():
    # As torch 2.11 does: the `snapshot` entry is added after the copy, so a dump holds the
    # entries of earlier dumps but not its own.
    copy = {"segments": [], "device_traces": [list(_state["trace"])], "allocator_settings": {},
            "external_annotations": list(_state["annotations"])}
    _event("snapshot", addr=0, size=0)
    if os.environ.get("FAKE_TORCH_SAY_SNAPSHOT"):
        print("snapshot taken", flush=True)
    return copy


def _need_cuda():
    # Real torch crashes when the allocator is asked for these before CUDA is initialized.
    assert _state["allocator"], "allocator used before CUDA was initialized"


def _init():
    _state["initialized"] = _state["allocator"] = True


def _set_memory_metadata(text):
    _need_cuda()
    _state["metadata"] = text


def _get_memory_metadata():
    _need_cuda()
    return _state["metadata"]


def _is_history_enabled():
    _need_cuda()
    return _state["enabled"]


class OutOfMemoryError(RuntimeError):
    pass


memory = types.SimpleNamespace(_record_memory_history=_record_memory_history, _snapshot=_snapshot,
                               _set_memory_metadata=_set_memory_metadata, _get_memory_metadata=_get_memory_metadata)
cuda = types.SimpleNamespace(is_available=lambda: os.environ.get("FAKE_TORCH_BUILD") != "cpu"
                             and os.environ.get("FAKE_TORCH_DEVICES") != "0",
                             memory=memory, OutOfMemoryError=OutOfMemoryError,
                             is_initialized=lambda: _state["initialized"], init=_init)
if os.environ.get("FAKE_TORCH_ACCELERATOR"):  # another accelerator than CUDA (xpu, npu, mps)
    accelerator = types.SimpleNamespace(
        is_available=lambda: True,
        current_accelerator=lambda: types.SimpleNamespace(type=os.environ["FAKE_TORCH_ACCELERATOR"]))
_C = types.SimpleNamespace(_cuda_isHistoryEnabled=_is_history_enabled,
                           _cuda_attach_out_of_memory_observer=_state["observers"].append)


class _RecordFunction:
    def __init__(self, name):
        self.name = name

    def _mark(self, stage):
        if _state["enabled"]:
            _state["annotations"].append({"stage": stage, "name": self.name, "device": 0, "time_us": _now()})

    def __enter__(self):
        self._mark("START")
        return self

    def __exit__(self, *exc):
        self._mark("END")


autograd = types.SimpleNamespace(profiler=types.SimpleNamespace(record_function=_RecordFunction))


def empty(size):
    _init()
    _event("alloc", addr=_state["next"], size=size)
    _state["next"] += size


def fake_oom(size):
    _event("oom", size=size, device_free=1 << 20)
    for observer in list(_state["observers"]):
        observer(0, size, 1 << 30, 1 << 20)
    raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes")
'''


@pytest.fixture
def fake_torch(tmp_path) -> Path:
    package = tmp_path / "faketorch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TORCH)
    return package.parent


def memtui_run(fake_torch: Path, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join([str(fake_torch), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "memtui", "run", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


TRAIN = """
import json, sys
import torch
import memtui.record
for i in range(5):
    torch.empty(1000 * (i + 1))
    memtui.record.step()
with open("seen.json", "w") as fh:
    json.dump({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}, fh)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

OOM = """
import sys
import torch
torch.empty(4096)
if "--catch" in sys.argv:
    try:
        torch.fake_oom(1 << 30)
    except torch.cuda.OutOfMemoryError:
        print("caught")
    torch.empty(8192)
else:
    torch.fake_oom(1 << 30)
"""


@pytest.fixture
def scripts(tmp_path) -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    (folder / "oom.py").write_text(OOM)
    return folder


def actions(path: Path) -> list[str]:
    return [e["action"] for e in read_snapshot(path)["device_traces"][0]]


def test_run_training_script(fake_torch, scripts, tmp_path):
    log = tmp_path / "calls.log"
    done = memtui_run(fake_torch, "--out", "snaps", "--max-entries", "77", "--context", "alloc",
                      str(scripts / "train.py"), "3", "--", "x", cwd=tmp_path, env={"FAKE_TORCH_LOG": str(log)})
    assert done.returncode == 3, done.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": [str(scripts / "train.py"), "3", "--", "x"], "name": "__main__", "path0": str(scripts)}
    assert log.read_text().split() == ["alloc", "python", "77", "True"]
    snap = tmp_path / "snaps" / "train.pickle"
    assert actions(snap) == ["alloc"] * 5
    model = open_snapshot(snap)
    starts = [a.name for a in model.annotations if a.stage == "START"]
    assert starts == [f"memtui.step#{n}" for n in range(6)]
    metadata = [e["user_metadata"] for e in read_snapshot(snap)["device_traces"][0]]
    assert metadata == [f"memtui.step#{n}" for n in range(5)]
    assert "memtui: snapshot at exit: snaps/train.pickle" in done.stderr
    assert done.stderr.rstrip().endswith("memtui: open it with: memtui snaps/train.pickle")


def test_run_uncaught_oom(fake_torch, scripts, tmp_path):
    done = memtui_run(fake_torch, str(scripts / "oom.py"), cwd=tmp_path)
    assert done.returncode == 1
    # The script's traceback, as python would print it: from the script's frame, not ours.
    assert "Traceback" in done.stderr and "OutOfMemoryError" in done.stderr
    assert "runpy" not in done.stderr and "memtui/record" not in done.stderr
    assert actions(tmp_path / "oom.oom.pickle") == ["alloc", "oom"]
    # The at-exit dump shows when the OOM dump was taken.
    assert actions(tmp_path / "oom.pickle") == ["alloc", "oom", "snapshot"]
    assert "memtui: open it with: memtui oom.oom.pickle" in done.stderr
    model = open_snapshot(tmp_path / "oom.oom.pickle")
    assert [int(i) for i in model.devices[0].oom_indices()] == [1]


def test_run_keeps_the_scripts_globals_until_the_exit_snapshot(fake_torch, tmp_path):
    # As with `python script.py` and an exit handler: what the script still holds at its
    # end is alive in the at-exit snapshot, whichever way the script ends.
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent("""
        import sys
        class Held:
            def __del__(self):
                print("freed", flush=True)
        KEEP = Held()
        if sys.argv[1:] == ["exit"]:
            sys.exit(0)
        if sys.argv[1:] == ["raise"]:
            raise ValueError("boom")
    """))
    for how, status in (("end", 0), ("exit", 0), ("raise", 1)):
        done = memtui_run(fake_torch, str(script), how, cwd=tmp_path, env={"FAKE_TORCH_SAY_SNAPSHOT": "1"})
        assert done.returncode == status, done.stderr
        assert done.stdout.split() == ["snapshot", "taken", "freed"], (how, done.stdout)


def test_run_on_oom_only(fake_torch, scripts, tmp_path):
    done = memtui_run(fake_torch, "--on-oom-only", str(scripts / "oom.py"), "--catch", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "caught" in done.stdout
    assert sorted(os.listdir(tmp_path)) == ["faketorch", "oom.oom.pickle", "scripts"]
    assert actions(tmp_path / "oom.oom.pickle") == ["alloc", "oom"]

    done = memtui_run(fake_torch, "--on-oom-only", str(scripts / "train.py"), cwd=tmp_path)
    assert done.returncode == 0
    assert "no CUDA out-of-memory error happened" in done.stderr


def test_run_step_range(fake_torch, scripts, tmp_path):
    done = memtui_run(fake_torch, "--steps", "2:4", str(scripts / "train.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    snap = tmp_path / "train.steps2-4.pickle"
    raw = read_snapshot(snap)
    # Steps 2 and 3 only: their two allocations, each with both markers.
    assert [e["size"] for e in raw["device_traces"][0] if e["action"] == "alloc"] == [3000, 4000]
    marks = [(a["stage"], a["name"]) for a in raw["external_annotations"]]
    assert marks == [("START", "memtui.step#2"), ("END", "memtui.step#2"),
                     ("START", "memtui.step#3"), ("END", "memtui.step#3")]
    assert not (tmp_path / "train.pickle").exists()

    done = memtui_run(fake_torch, "--steps", "9:12", str(scripts / "train.py"), cwd=tmp_path)
    assert done.returncode == 0
    assert "reached step 5" in done.stderr and "nothing was written" in done.stderr


def test_run_under_a_launcher_names_files_by_rank(fake_torch, scripts, tmp_path):
    for rank in ("0", "1"):
        done = memtui_run(fake_torch, "--out", "o", str(scripts / "oom.py"), cwd=tmp_path,
                          env={"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": "2"})
        assert done.returncode == 1
    assert sorted(os.listdir(tmp_path / "o")) == [
        "oom.rank0.oom.pickle", "oom.rank0.pickle", "oom.rank1.oom.pickle", "oom.rank1.pickle",
    ]


@pytest.mark.parametrize("env, why", [({"FAKE_TORCH_BUILD": "cpu"}, "has no CUDA support"),
                                      ({"FAKE_TORCH_DEVICES": "0"}, "sees no CUDA device")])
def test_run_without_cuda_is_one_line(fake_torch, scripts, tmp_path, env, why):
    done = memtui_run(fake_torch, str(scripts / "train.py"), cwd=tmp_path, env=env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA is not available" in lines[0] and why in lines[0], done.stderr
    assert not (tmp_path / "seen.json").exists()  # the script never ran


def test_run_on_another_accelerator_says_what_it_records(fake_torch, scripts, tmp_path):
    """memtui run records CUDA (and ROCm) GPUs; on a machine with an XPU it says how to record
    that one instead, in one line."""
    done = memtui_run(fake_torch, str(scripts / "train.py"), cwd=tmp_path,
                      env={"FAKE_TORCH_BUILD": "cpu", "FAKE_TORCH_ACCELERATOR": "xpu"})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "records CUDA (and ROCm) GPUs" in lines[0], done.stderr
    assert "xpu is not recorded by memtui run" in lines[0] and "torch.xpu.memory._record_memory_history" in lines[0]


def test_run_missing_script(fake_torch, tmp_path):
    done = memtui_run(fake_torch, "nope.py", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == "memtui: nope.py: no such file"


def test_python_api_with_fake_torch(fake_torch, tmp_path):
    code = textwrap.dedent("""
        import torch, memtui
        with memtui.record("api.pickle.xz"):
            torch.empty(10)
            memtui.record.step()
            with memtui.record("inner.pickle"):   # nested: must not stop the outer recording
                torch.empty(20)
            torch.empty(30)
        torch.empty(40)                            # after the block: not recorded
        dump = memtui.record.on_oom("o.pickle", max_dumps=2, quiet=True)
        for _ in range(3):
            try:
                torch.fake_oom(99)
            except torch.cuda.OutOfMemoryError:
                pass
        print(dump.ooms, [p.rsplit("/", 1)[1] for p in dump.paths])
    """)
    env = {"PYTHONPATH": os.pathsep.join([str(fake_torch), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3 ['o.pickle', 'o.2.pickle']"
    sizes = [e["size"] for e in read_snapshot(tmp_path / "api.pickle.xz")["device_traces"][0] if e["action"] == "alloc"]
    assert sizes == [10, 20, 30]
    assert (tmp_path / "inner.pickle").exists()


def test_options_are_checked():
    from memtui.record import Options

    for bad in ({"max_entries": 0}, {"stacks": "cpp"}, {"context": "some"}):
        with pytest.raises(MemtuiError):
            Options(**bad)
