"""Command line entry point.

``memtui SNAP`` opens the explorer; ``memtui COMMAND ...`` runs a headless command.
Each command lives in its own module under ``memtui.commands`` (``NAME``, ``HELP``,
``add_arguments(parser)``, ``run(args) -> int``) and is found by name, so adding one
never touches this file. Textual is imported only when the explorer opens.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from memtui import __version__
from memtui.commands._common import add_cache_options, configure_cache, release_cache, take_cache_options
from memtui.errors import MemtuiError

EPILOG = "Commands: {names}. Run 'memtui COMMAND --help' for each."


def command_modules() -> dict[str, object]:
    import memtui.commands as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"memtui.commands.{info.name}")
        found[getattr(module, "NAME", info.name)] = module
    return found


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = take_cache_options(argv)
        commands = command_modules()
        if argv and argv[0] in commands:
            module = commands[argv[0]]
            parser = argparse.ArgumentParser(prog=f"memtui {argv[0]}", description=module.HELP)
            module.add_arguments(parser)
            add_cache_options(parser)
            args = parser.parse_args(argv[1:])
            configure_cache(args)
            return int(module.run(args) or 0)
        return _open_explorer(argv, commands)
    except MemtuiError as exc:
        print(f"memtui: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("memtui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `memtui events ... | head`: the reader went away, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug: one line naming a report, not a traceback
        from memtui.crash import report_crash

        return report_crash(exc)
    finally:
        release_cache()


def _open_explorer(argv: list[str], commands: dict[str, object]) -> int:
    names = ", ".join(sorted(commands))
    parser = argparse.ArgumentParser(
        prog="memtui",
        description="Explore a PyTorch CUDA memory snapshot in the terminal.",
        epilog=EPILOG.format(names=names),
    )
    parser.add_argument("snapshot", nargs="?", help="snapshot file (.pickle, compressed, or a memtui .msgpack export)")
    parser.add_argument("--demo", action="store_true", help="open the small sample snapshot bundled with memtui")
    parser.add_argument("--device", type=int, default=None, help="device to show first")
    parser.add_argument("--version", action="version", version=f"memtui {__version__}")
    add_cache_options(parser)
    args = parser.parse_args(argv)
    configure_cache(args)
    if args.demo:
        from memtui.data import demo_snapshot_path

        path = demo_snapshot_path()
    elif args.snapshot:
        path = args.snapshot
    else:
        parser.print_help()
        return 2
    from memtui.load import inspect_source

    inspect_source(path)  # fail fast, with one line, before the terminal is taken over
    from memtui.tui.app import run_app

    return run_app(path, device=args.device)
