"""``memtui run``: run a Python script as ``python script.py args`` would, recording CUDA memory.

The script runs in this process, as ``__main__``, with the same ``sys.argv``, so its OOMs
reach the observer that writes the OOM snapshot. Its exit status
becomes ours. Snapshots go to ``OUT/SCRIPT.pickle`` (at exit), ``OUT/SCRIPT.oom.pickle`` (at
the first OOM) and ``OUT/SCRIPT.stepsA-B.pickle`` (with a step range), with ``.rankN`` under
a launcher.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import shlex
import sys
import traceback
import types
from dataclasses import dataclass, field

from memtui.errors import UsageError
from memtui.record import backend, oom, steps
from memtui.record.files import launcher_rank, rank_path
from memtui.record.recording import DEFAULT_MAX_ENTRIES, Options, Session, Stepper
from memtui.units import format_bytes


@dataclass
class RunOptions:
    script: str
    args: list[str] = field(default_factory=list)
    out: str = "."
    max_entries: int = DEFAULT_MAX_ENTRIES
    stacks: str = "python"
    context: str | None = "all"
    steps: tuple[int, int | None] | None = None
    on_oom_only: bool = False
    live: bool = False  # also serve the memory to `memtui watch` while the script runs


@dataclass
class Written:
    kind: str  # "exit", "oom" or "steps"
    path: str


def output_path(out: str, script: str, tag: str = "") -> str:
    """``OUT/train.pickle``, ``OUT/train.oom.pickle``; under a launcher the name holds a
    ``{rank}`` placeholder, which ``rank_path`` (called by every writer) fills in."""
    stem = os.path.splitext(os.path.basename(script))[0] or "script"
    rank = ".rank{rank}" if launcher_rank() is not None else ""
    suffix = f".{tag}" if tag else ""
    return os.path.join(out, f"{stem}{rank}{suffix}.pickle")


def run_script(opts: RunOptions) -> int:
    """Run the script with recording on; returns its exit status."""
    backend.cuda_torch()  # fail with one line before the script starts, not in the middle
    if not os.path.exists(opts.script):
        raise UsageError(f"{opts.script}: no such file")
    if os.path.isdir(opts.script):
        raise UsageError(f"{opts.script}: is a directory; memtui run takes a Python script")
    options = Options(opts.max_entries, opts.stacks, opts.context)
    oom_dump = oom.on_oom(output_path(opts.out, opts.script, "oom"), record=False)
    stepper: Stepper | None = None
    session: Session | None = None
    if opts.steps is not None:
        start, end = opts.steps
        tag = f"steps{start}-{'' if end is None else end}"
        stepper = Stepper(
            start, end, output_path(opts.out, opts.script, tag),
            max_entries=options.max_entries, stacks=options.stacks, context=options.context,
            write=not opts.on_oom_only,
        ).attach()
    else:
        session = Session(options)
        session.start()

    serving = None
    if opts.live:
        from memtui.record.serving import live

        serving = live(max_entries=options.max_entries, stacks=options.stacks, context=options.context,
                       argv=[opts.script, *opts.args])
        print(f"memtui: serving CUDA memory at {serving.path} (memtui watch attaches)", file=sys.stderr, flush=True)

    code, script_module = execute(opts.script, opts.args)

    if serving is not None:
        serving.stop()  # the watchers are told the job ended before the last snapshots are written

    written: list[Written] = [Written("oom", p) for p in oom_dump.paths]
    oom_dump.remove()
    if stepper is not None:
        if stepper.close():
            written.append(Written("steps", stepper.written))
    elif session is not None:
        if not opts.on_oom_only:
            written.append(Written("exit", session.dump(rank_path(output_path(opts.out, opts.script)))))
        session.stop()
    del script_module  # only now may the script's globals go
    report(written, opts, oom_dump.ooms)
    return code


def execute(script: str, args: list[str]) -> tuple[int, types.ModuleType]:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *args]``.

    Returns its exit status and its module. The caller keeps the module until the at-exit
    snapshot is written: with ``python script.py`` the script's globals are still alive when
    exit handlers run, and the snapshot should show the memory they hold.
    """
    path = os.path.abspath(script)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    saved_argv, saved_main = sys.argv, sys.modules.get("__main__")
    saved_path0 = sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    # `python script.py` puts the script's directory first on sys.path; scripts rely on it
    # to import their sibling modules.
    if sys.path:
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    sys.modules["__main__"] = module  # pickle and multiprocessing look the script up here
    try:
        with io.open_code(path) as fh:
            code = compile(fh.read(), path, "exec")  # bytes: honours a `# coding:` line
        exec(code, module.__dict__)
        return 0, module
    except SystemExit as exc:
        return exit_status(exc.code), module
    except KeyboardInterrupt:
        print_script_traceback(path)
        return 130, module
    except BaseException:
        print_script_traceback(path)
        return 1, module
    finally:
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        sys.stdout.flush()


def exit_status(code: object) -> int:
    """The process status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def print_script_traceback(path: str) -> None:
    """Print the exception as ``python script.py`` would: starting at the script's own frame."""
    etype, value, tb = sys.exc_info()
    target = os.path.abspath(path)
    first = tb
    while first is not None and os.path.abspath(first.tb_frame.f_code.co_filename) != target:
        first = first.tb_next
    traceback.print_exception(etype, value, first or tb)
    sys.stderr.flush()


def report(written: list[Written], opts: RunOptions, ooms: int) -> None:
    err = sys.stderr
    labels = {"exit": "at exit", "oom": "at CUDA OOM", "steps": "for the step range"}
    for item in written:
        size = format_bytes(os.path.getsize(item.path)) if os.path.exists(item.path) else "?"
        print(f"memtui: snapshot {labels[item.kind]}: {display(item.path)} ({size})", file=err)
    if ooms > len([w for w in written if w.kind == "oom"]):
        print(f"memtui: {ooms} CUDA OOMs happened; the first was written, the rest are in the trace", file=err)
    if not written:
        if opts.on_oom_only:
            print("memtui: no CUDA out-of-memory error happened, so nothing was written (--on-oom-only)", file=err)
        elif opts.steps is not None:
            start, end = opts.steps
            span = f"{start}:{'' if end is None else end}"
            print(
                f"memtui: the script reached step {steps.current_step()}, so steps {span} never began "
                "and nothing was written; call memtui.record.step() once per step",
                file=err,
            )
        return
    best = next((w for w in written if w.kind == "oom"), written[-1])
    print(f"memtui: open it with: memtui {shlex.quote(display(best.path))}", file=err)
    err.flush()


def display(path: str) -> str:
    """A path relative to the working directory when it is below it, else absolute."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
