"""Command line entry point.

``memtui SNAP`` opens the explorer; ``memtui COMMAND ...`` runs a headless command.
Each analysis of :data:`memtui.services.catalog.SPECS` is a command made from its spec
(:class:`memtui.commands._analysis.SpecCommand`); the other commands, and analyses with
flags of the command line's own, live in their own module under ``memtui.commands``
(``NAME``, ``HELP``, ``add_arguments(parser)``, ``run(args) -> int``). Both are found by
name, so adding one never touches this file. Textual is imported only when the explorer
opens.

The cache options are read once, here: the command gets the model cache as
``args.model_cache`` and the interactive front ends as ``args.front_ends``, which sit
above the commands (``memtui.tui``, ``memtui.web``) and so are handed down to them rather
than imported by them. So is the MCP server (``memtui.mcp``), a front end beside them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from memtui import __version__
from memtui.errors import Interrupted, MemtuiError, MissingDependencyError, UsageError
from memtui.exit_signals import HANDLED as EXIT_SIGNALS_HANDLED
from memtui.exit_signals import ExitSignals

if TYPE_CHECKING:
    from memtui.cache.store import ModelCache
    from memtui.export.place import ExportPlace

# `run` executes the user's script in this process (memtui/record/runner.py).
RUNS_USER_CODE = {"run"}
# `run` executes the user's script, whose signals are its own; `serve` and `mcp` run event
# loops that end on their own terms.
SIGNALS_LEFT_ALONE = {"run", "serve", "mcp"}
# The same three end as Python ends (memtui/process_end.py is not used): `run`'s script has its
# objects finalized as under `python script.py`; the servers end on their own terms.
ENDS_AS_PYTHON_DOES = SIGNALS_LEFT_ALONE
# Commands that keep running (servers, live views, screens of several files): their cache
# writes start as each model is built. Every other command answers first, then writes.
WRITES_AS_BUILT = {"run", "serve", "mcp", "watch", "ranks", "diff"}
# Commands whose files are not one snapshot opened through the model (a script, folders of
# ranks, files still being written, servers, convert's plain read): no scan is started for
# them before the imports (a test runs every other command and sees it take the scan).
READ_OTHERWISE = RUNS_USER_CODE | SIGNALS_LEFT_ALONE | {"watch", "ranks", "convert"}
SIGNAL_WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
if hasattr(signal, "SIGHUP"):
    SIGNAL_WORDS[signal.SIGHUP] = "hung up"

EPILOG = "Commands: {names}. Run 'memtui COMMAND --help' for each."


class FrontEnds:
    """What a command may hand its result to for browsing; each imports Textual only when it opens."""

    def __init__(self, cache: ModelCache | None) -> None:
        self.cache = cache
        self.cache_root = cache.root if cache is not None else None

    def explore(self, path: str, device: int | None = None, export_place: ExportPlace | None = None) -> int:
        from memtui.export.place import ANYWHERE
        from memtui.tui.early_load import EarlyLoad

        started = EarlyLoad(path, device, self.cache)  # opening while Textual is imported and the app starts
        from memtui.tui.app import run_app

        failed = started.failed_already()
        if failed is not None:  # said without starting the app: no terminal codes around the line
            print(f"memtui: {failed[0]}", file=sys.stderr)
            return failed[1]
        try:
            return run_app(path, device=device, cache=self.cache, export_place=export_place or ANYWHERE,
                           started=started)
        finally:
            started.abandon()  # an app that ended before it took the snapshot leaves it unopened

    def browse_ranks(self, files: list[str], depth: int, runner, summary_cache, moment: str) -> int:
        from memtui.tui.ranks_app import run_ranks_app

        return run_ranks_app(files, depth, runner, summary_cache, moment, model_cache=self.cache)

    def show_diff(self, diff) -> int:
        from memtui.tui.diff_app import run_diff_app

        return run_diff_app(diff, cache_root=self.cache_root)

    def watch(self, jobs: list, out_dir: str | None = ".") -> int:
        from memtui.tui.watch_app import run_watch_app

        return run_watch_app(jobs, out_dir, cache=self.cache)

    def mcp_server(self):
        """The MCP server's ``serve(roots, cache)`` (:func:`memtui.mcp.server.serve`)."""
        try:
            from memtui.mcp.server import serve
        except ImportError as exc:
            if exc.name is None or exc.name.split(".")[0] == "memtui":
                raise  # a bug in memtui, not a missing package
            missing = "" if exc.name.split(".")[0] == "mcp" else f" ({exc.name} is missing)"
            raise MissingDependencyError(f"memtui mcp needs the MCP SDK{missing}: pip install 'memtui[mcp]'") from None
        return serve

    def snapshot_server(self) -> type:
        """The browser server's class (:class:`memtui.web.server.SnapshotServer`)."""
        try:
            from memtui.web.server import SnapshotServer
        except ImportError:
            raise MissingDependencyError(
                "serving to a browser needs textual-serve: pip install 'memtui[web]'") from None
        return SnapshotServer


def command_modules() -> dict[str, object]:
    """Every command by name (each as :func:`find_command` gives it; all of them imported)."""
    return {name: find_command(name) for name in command_names()}


def find_command(name: str) -> object | None:
    """The command called ``name``, importing nothing of the others: the module of
    memtui.commands of that name (a module's NAME is its file's name, tested), else the
    command made from the analysis's spec; None when there is no such command."""
    from memtui.services.catalog import SPECS

    if name in _module_names():
        return importlib.import_module(f"memtui.commands.{name}")
    spec = next((s for s in SPECS if s.name == name), None)
    if spec is None:
        return None
    from memtui.commands._analysis import SpecCommand

    return SpecCommand(spec)


def command_names() -> list[str]:
    """Every command's name, without importing any command."""
    from memtui.services.catalog import SPECS

    return sorted({spec.name for spec in SPECS} | _module_names())


def _module_names() -> set[str]:
    import memtui.commands as package

    # The package's own files, listed (pkgutil, which would also do, is a module more to
    # import at every start); a command is a module, never a package.
    return {name[:-3] for folder in package.__path__ for name in os.listdir(folder)
            if name.endswith(".py") and name[:-3].isidentifier() and not name.startswith("_")}


def main(argv: list[str] | None = None) -> int:
    # The signal handlers go in before anything slow is imported (numpy, the commands), so
    # that a Ctrl-C even then ends in one line.
    argv = list(sys.argv[1:] if argv is None else argv)
    _spare_blas_threads(argv)
    started: list[ModelCache] = []  # the model cache, once decided: its writes are waited for or abandoned
    signals = ExitSignals()
    # The cyclic collector waits until the command's modules are imported (_run turns it
    # back on, see _collect_from_now): the imports make tens of thousands of objects and
    # almost no garbage, and its 50-70 collections meanwhile were 6-9 ms of the main
    # thread's time, which a cold open on few cores shares with the scan.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with signals:
            try:
                _try_scan_ahead(argv)
                return _run(argv, started, signals, collect=collecting)
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (exit_signals.py)
                return _end_interrupted(exc, signals, started)
    except KeyboardInterrupt as exc:  # one that came before the handlers were in place
        return _end_interrupted(exc, signals, started)
    finally:
        if collecting:
            gc.enable()
        _stop_scan_ahead()


def _try_scan_ahead(argv: list[str]) -> None:
    """:func:`_scan_ahead`, which is only a head start: whatever goes wrong there (a thread
    that cannot start, an unreadable cache folder) leaves the command to open as it would."""
    try:
        _scan_ahead(argv)
    except Exception:  # noqa: BLE001 - the open that follows says what is wrong, if anything is
        pass


def _scan_ahead(argv: list[str]) -> None:
    """Start what the open of the snapshot the command names will need, to run while numpy
    and the command are imported: the checks of its model where the cache the command reads
    keeps one (memtui/cache/check_ahead.py), else the compiled scan of the file where the open
    would scan it (memtui/load/ahead.py). A guess from the words alone (the parser and the
    commands' names come with the imports): the first word after the command that names a
    file; a wrong guess costs work that nobody takes, stopped or forgotten as the command ends."""
    from memtui.cache import check_ahead
    from memtui.cache.names import default_cache_dir, kept_entry
    from memtui.commands._arguments import cache_options_anywhere, take_cache_options
    from memtui.load import ahead
    from memtui.model.actions import BLOCK_ROLE_NAMES

    rest, _ = take_cache_options(argv)
    if not rest or rest[0] in READ_OTHERWISE or rest[0].startswith("-") or any(map(_asks_for_help, rest)):
        return
    words = rest if os.path.isfile(rest[0]) else rest[1:]  # `memtui SNAP` or `memtui COMMAND ... SNAP`
    path = next((word for word in words if not word.startswith("-") and os.path.isfile(word)), None)
    if path is None:
        return
    options = cache_options_anywhere(argv)  # before the command or after it
    root = os.path.abspath(options.get("cache_dir") or default_cache_dir())
    kept = None if options.get("no_cache") else kept_entry(root, path)
    if kept is None:
        ahead.start(path, pair_by=BLOCK_ROLE_NAMES)
    elif ahead.worth_a_thread():
        check_ahead.start(kept)


def _asks_for_help(word: str) -> bool:
    """``-h``, ``--help`` or an abbreviation argparse takes for it (``--he``)."""
    return word == "-h" or (len(word) >= 3 and "--help".startswith(word))


def _stop_scan_ahead() -> None:
    """A scan that no open took stops as the command ends (none was started where the
    module was never imported: ``memtui --help``)."""
    for name in ("memtui.load.ahead", "memtui.cache.check_ahead"):
        started = sys.modules.get(name)
        if started is not None:
            started.discard()


def _spare_blas_threads(argv: list[str]) -> None:
    """Keep numpy's OpenBLAS from starting a thread per core as numpy is imported: they spin
    a while before they sleep, on cores that the scan's threads, or the training job beside
    memtui on a GPU box, could use; memtui does no linear algebra. Done before anything
    imports numpy; a setting of the user's own is kept. ``run`` executes the user's script
    in this process, so its threads are the script's business."""
    from memtui.commands._arguments import take_cache_options

    rest, _ = take_cache_options(argv)
    if not rest or rest[0] not in RUNS_USER_CODE:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def ends_as_python_does(argv: list[str]) -> bool:
    """Whether the command ``argv`` names must end with the interpreter's own teardown."""
    from memtui.commands._arguments import take_cache_options

    rest, _ = take_cache_options(argv)
    return bool(rest) and rest[0] in ENDS_AS_PYTHON_DOES


def _run(argv: list[str], started: list[ModelCache], signals: ExitSignals, collect: bool = True) -> int:
    """The command ``argv`` names, or the explorer; ``collect``: turn the cyclic collector
    on once the modules are imported (main turned it off)."""
    from memtui.commands._arguments import add_cache_options, take_cache_options

    cache: ModelCache | None = None
    try:
        argv, leading = take_cache_options(argv)
        module: Any = find_command(argv[0]) if argv else None
        if module is not None:
            if argv[0] in SIGNALS_LEFT_ALONE:
                signals.release()
            parser = _OneLineParser(prog=f"memtui {argv[0]}", description=module.HELP)
            module.add_arguments(parser)
            add_cache_options(parser)
            args = parser.parse_args(argv[1:]) if argv[0] in RUNS_USER_CODE else parser.parse_dashed_values(argv[1:])
            cache = _hand_down(args, leading, started)
            if cache is not None and argv[0] not in WRITES_AS_BUILT:
                cache.hold_writes()  # the output first: cache.wait() below starts the write
            if collect:
                _collect_from_now()
            code = int(module.run(args) or 0)
            sys.stdout.flush()  # the answer is out before the write begins
        else:
            _refuse_unknown_command(argv)
            parser = _explorer_parser(command_names())
            args = parser.parse_args(argv)
            cache = _hand_down(args, leading, started)
            if collect:
                _collect_from_now()
            code = _open_explorer(args, parser)
    except MemtuiError as exc:
        print(f"memtui: {exc.message}", file=sys.stderr)
        code = exc.exit_code
    except BrokenPipeError:
        # `memtui events ... | head`: the reader went away, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except Exception as exc:  # a bug: one line naming a report, not a traceback
        from memtui.crash import report_crash

        code = report_crash(exc, cache_root=cache.root if cache is not None else None)
    if cache is not None:
        if code > 128 and code - 128 in EXIT_SIGNALS_HANDLED:
            cache.abandon()  # the explorer ended on a signal: the user asked to stop now
        else:
            cache.wait()  # the model written in the background is finished before the process ends
    return code


_set_aside: list[bool] = []  # whether the imports' objects were frozen, once per process


def _collect_from_now() -> None:
    """The cyclic collector on, for the command's own work. What the first command's imports
    made is set aside first (``gc.freeze``: modules, classes and functions, kept for the
    process's life): else the first collections would go through all of it, and the time
    saved would only come later. Once: a later call in the same process (a test's) imports
    nothing new, and freezing then would keep its garbage for ever."""
    if not _set_aside:
        _set_aside.append(True)
        gc.freeze()
    gc.enable()


def _refuse_unknown_command(argv: list[str]) -> None:
    """``memtui frobnicate FILE``: a word that is neither a command nor a file, before more
    arguments, is a command misspelt (the explorer's parser would only say FILE is unexpected)."""
    word = argv[0] if argv else ""
    if len(argv) > 1 and not argv[1].startswith("-") and word.isidentifier() and not os.path.exists(word):
        import difflib

        names = command_names()
        close = difflib.get_close_matches(word, names, n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; the commands: {', '.join(names)}"
        raise UsageError(f"unknown command {word!r}{hint}")


def _end_interrupted(exc: KeyboardInterrupt, signals: ExitSignals, started: list[ModelCache]) -> int:
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    signals.ending(signum)
    for cache in started:
        cache.abandon()  # no temporary file of the cache is left behind
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")  # over a progress line, not after it
    print(f"memtui: {SIGNAL_WORDS.get(signum, 'stopped by a signal')}", file=sys.stderr)
    return 128 + signum


def _hand_down(args: argparse.Namespace, leading: dict, started: list[ModelCache]) -> ModelCache | None:
    """Decide the model cache once and put it, with the front ends, on ``args``."""
    from memtui.commands._common import choose_cache

    args.model_cache = cache = choose_cache(args, leading)
    args.front_ends = FrontEnds(cache)
    if cache is not None:
        started.append(cache)
    return cache


def _help_width() -> int:
    """The width argparse lays its help out in, as shutil.get_terminal_size would give it
    (COLUMNS, else standard output's terminal, else 80), less the 2 argparse keeps."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns if columns > 0 else 80) - 2


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, at a width asked without shutil: argparse makes a formatter for each
    argument a command adds, and its own way imports shutil, and the compressors shutil
    imports, at every start."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _help_width() if width is None else width)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a wrong argument is one line naming the help, as every other refusal
    (argparse prints the whole usage before its line, and exits itself)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(**kwargs)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("memtui").strip()
        raise UsageError(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")

    def parse_dashed_values(self, args: list[str]) -> argparse.Namespace:
        """parse_args, where an option's value may start with '-' (`--filter -stream:0`, a
        negated filter; `--cap -5GiB`), which argparse takes for an option of its own:
        such a value is joined to its option (`--filter=-stream:0`) unless it is one of this
        command's options itself. Not for `run`, whose script's arguments are its own."""
        joined: list[str] = []
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                joined.extend(args[i:])
                break
            action = self._option_string_actions.get(token)
            value = args[i + 1] if i + 1 < len(args) else ""
            if action is not None and action.nargs is None and value.startswith("-") and value != "--" \
                    and not self._names_an_option(value):
                joined.append(f"{token}={value}")
                i += 2
                continue
            joined.append(token)
            i += 1
        return self.parse_args(joined)

    def _names_an_option(self, token: str) -> bool:
        # A long one (perhaps abbreviated) or exactly a short one; '-freed' is a negated filter
        # even where -f is an option (a short option with its value attached, -n5, is a value here)
        return token.startswith("--") or token in self._option_string_actions


def _explorer_parser(commands: list[str]) -> argparse.ArgumentParser:
    names = ", ".join(commands)
    parser = _OneLineParser(
        prog="memtui",
        description="Explore a PyTorch memory snapshot (CUDA, ROCm, or any accelerator whose allocator writes "
                    "the same layout) in the terminal.",
        epilog=EPILOG.format(names=names),
    )
    parser.add_argument("snapshot", nargs="?", help="snapshot file (.pickle, compressed, or a memtui .msgpack export)")
    parser.add_argument("--demo", action="store_true", help="open the small sample snapshot bundled with memtui")
    parser.add_argument("--device", type=int, default=None, help="device to show first")
    parser.add_argument("--version", action="version", version=f"memtui {__version__}")
    exports = parser.add_mutually_exclusive_group()
    exports.add_argument("--export-dir", metavar="DIR",
                         help="the export key (x) writes only inside DIR (memtui serve passes this)")
    exports.add_argument("--no-export", action="store_true", help="turn the export key (x) off")
    from memtui.commands._arguments import add_cache_options

    add_cache_options(parser)
    return parser


def _open_explorer(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.demo:
        from memtui.data import demo_snapshot_path

        path = demo_snapshot_path()
    elif args.snapshot:
        path = args.snapshot
    else:
        parser.print_help()
        return 2
    from memtui.load.source import inspect_source

    inspect_source(path)  # fail fast, with one line, before the terminal is taken over
    from memtui.export.place import ANYWHERE, EXPORTS_OFF, ExportPlace

    place = ExportPlace(off=EXPORTS_OFF) if args.no_export else ANYWHERE
    if args.export_dir is not None:
        place = ExportPlace.inside(args.export_dir)
    return args.front_ends.explore(path, device=args.device, export_place=place)
