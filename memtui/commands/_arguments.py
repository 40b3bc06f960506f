"""The arguments the commands share, importing nothing heavy.

The command line reads the leading cache options with these to tell which command runs
before anything imports numpy (memtui.cli sets numpy's BLAS threads by it); opening,
progress and output are in _common.
"""

from __future__ import annotations

import argparse


def add_snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", help="snapshot file (.pickle, compressed, or a memtui .msgpack export)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """The global cache options, shown in every command's help (:func:`cache_options` reads them)."""
    group = parser.add_argument_group("model cache")
    group.add_argument("--cache-dir", metavar="DIR",
                       help="where built models are cached (default: $XDG_CACHE_HOME/memtui)")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the model cache")


def take_cache_options(argv: list[str]) -> tuple[list[str], dict]:
    """Split off the cache options written before the command (``memtui --no-cache info X``):
    the rest of ``argv``, and those options for :func:`cache_options`.

    Options after the command are left to argparse (:func:`add_cache_options`), so that a
    script's own ``--no-cache`` after ``memtui run script.py`` stays the script's.
    """
    leading: dict = {}
    argv = list(argv)
    while argv:
        taken = _cache_option(argv, 0, leading)
        if not taken:
            break
        del argv[:taken]
    return argv, leading


def cache_options_anywhere(argv: list[str]) -> dict:
    """The cache options among all of ``argv``'s words, as :func:`take_cache_options` reads
    them (the last of each wins, as argparse has it): for a guess made before the command's
    parser exists (memtui.cli, the scan before the imports)."""
    found: dict = {}
    i = 0
    while i < len(argv):
        i += _cache_option(argv, i, found) or 1
    return found


def _cache_option(argv: list[str], i: int, into: dict) -> int:
    """Read the cache option at ``argv[i]`` into ``into``: how many words it took (0: none)."""
    word = argv[i]
    if word == "--no-cache":
        into["no_cache"] = True
        return 1
    if word == "--cache-dir" and i + 1 < len(argv):
        into["cache_dir"] = argv[i + 1]
        return 2
    if word.startswith("--cache-dir="):
        into["cache_dir"] = word.split("=", 1)[1]
        return 1
    return 0


def cache_options(args: argparse.Namespace, leading: dict) -> tuple[bool, str | None]:
    """(whether the model cache is used, its folder or None for the default) from the
    command's cache options and the ``leading`` ones (:func:`take_cache_options`)."""
    no_cache = getattr(args, "no_cache", False) or leading.get("no_cache", False)
    return not no_cache, getattr(args, "cache_dir", None) or leading.get("cache_dir")
