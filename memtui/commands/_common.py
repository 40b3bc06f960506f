"""Pieces shared by the headless commands: opening with progress, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
import time

from memtui.model import Snapshot, open_snapshot


def add_snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", help="snapshot file (.pickle, compressed, or a memtui .msgpack export)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def load(path: str) -> Snapshot:
    """Open a snapshot (through the model cache unless ``--no-cache``), with a progress
    line on stderr when it is a terminal."""
    return open_snapshot(path, progress=StderrProgress() if sys.stderr.isatty() else None)


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """The global cache options, shown in every command's help (:func:`take_cache_options` reads them)."""
    group = parser.add_argument_group("model cache")
    group.add_argument("--cache-dir", metavar="DIR",
                       help="where built models are cached (default: $XDG_CACHE_HOME/memtui)")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the model cache")


_leading_cache_options: dict = {}


def take_cache_options(argv: list[str]) -> list[str]:
    """Remove the cache options written before the command (``memtui --no-cache info X``).

    Options after the command are left to argparse (:func:`add_cache_options`), so that a
    script's own ``--no-cache`` after ``memtui run script.py`` stays the script's.
    """
    _leading_cache_options.clear()
    argv = list(argv)
    while argv:
        if argv[0] == "--no-cache":
            _leading_cache_options["no_cache"] = True
            del argv[0]
        elif argv[0] == "--cache-dir" and len(argv) > 1:
            _leading_cache_options["cache_dir"] = argv[1]
            del argv[:2]
        elif argv[0].startswith("--cache-dir="):
            _leading_cache_options["cache_dir"] = argv[0].split("=", 1)[1]
            del argv[0]
        else:
            break
    return argv


def configure_cache(args: argparse.Namespace) -> None:
    """Set up the model cache that :func:`load` and the explorer use for this command."""
    from memtui.cache import ModelCache
    from memtui.model import set_default_cache

    no_cache = getattr(args, "no_cache", False) or _leading_cache_options.get("no_cache", False)
    folder = getattr(args, "cache_dir", None) or _leading_cache_options.get("cache_dir")
    cache = None if no_cache else ModelCache(folder)
    if cache is not None:
        cache.check_writable()  # the one warning line comes now, before a terminal UI starts
    set_default_cache(cache)


def release_cache() -> None:
    """Finish the cache writes of this command and stop using the cache (see take_cache_options)."""
    from memtui.model import get_default_cache, set_default_cache

    cache = get_default_cache()
    if cache is not None:
        cache.wait()
    set_default_cache(None)


# How the default device is chosen, as every command's --device help says it.
DEFAULT_DEVICE = "the device with an OOM, else the one with the most events, else the most reserved"


def device_or_error(snapshot: Snapshot, device: int | None) -> int:
    """The device a command looks at: ``--device`` when given, else the snapshot's default
    (the same rule as the explorer's, :meth:`Snapshot.default_device`)."""
    return snapshot.device_or_default(device)


def print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


class StderrProgress:
    """A one-line progress display on stderr, redrawn at most ten times a second.

    While reading it shows the true share of the file consumed and the rate, since the
    decoder reports bytes of the file itself (compressed or not).
    """

    def __init__(self) -> None:
        self._last = 0.0
        self._stage = ""
        self._stage_start = 0.0
        self._shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage != self._stage:
            self._stage, self._stage_start = stage, now
        finished = total and done >= total
        if now - self._last < 0.1 and not finished:
            return
        self._last = now
        text = f"{stage} {100 * done / total:5.1f}%" if total else stage
        elapsed = now - self._stage_start
        if stage == "reading" and elapsed > 0.2 and done:
            rate = done / elapsed
            text += f"  {rate / 1e6:6.1f} MB/s"
            if not finished:
                text += f"  {max(0.0, (total - done) / rate):4.0f} s left"
        sys.stderr.write(f"\r\x1b[2K{text}")
        sys.stderr.flush()
        self._shown = True
        if stage == "indexing" and finished:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
