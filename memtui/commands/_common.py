"""Pieces shared by the headless commands: the model cache chosen, opening with progress, JSON output.

The command line decides the model cache once (:func:`choose_cache`) and hands it to the
command as ``args.model_cache``; nothing here keeps it in a global.
"""

from __future__ import annotations

import argparse
import sys
import time

from memtui.cache.store import ModelCache
from memtui.commands._arguments import cache_options
from memtui.errors import printable
from memtui.model import Snapshot
from memtui.open import open_snapshot
from memtui.services.common import model_notes


def load(path: str, cache: ModelCache | None, warnings_listed: bool = False) -> Snapshot:
    """Open a snapshot through ``cache`` (the command's ``args.model_cache``: None with
    ``--no-cache``), with a progress line on stderr when it is a terminal. Where the model
    replaced values it could not use (a size past 64 bits read as 0, a segment's device
    number), one line on stderr says so and points to ``memtui check``, which lists them
    (``warnings_listed``: the command lists them itself)."""
    snapshot = open_snapshot(path, progress=StderrProgress() if sys.stderr.isatty() else None, cache=cache)
    for note in model_notes(snapshot, path, replaced=not warnings_listed):
        print(f"memtui: note: {printable(note)}", file=sys.stderr)
    return snapshot


def choose_cache(args: argparse.Namespace, leading: dict) -> ModelCache | None:
    """The model cache of this command, from its cache options and the ``leading`` ones
    (:func:`memtui.commands._arguments.take_cache_options`); None with ``--no-cache``."""
    wanted, folder = cache_options(args, leading)
    if not wanted:
        return None
    cache = ModelCache(folder)
    cache.check_writable()  # the one warning line comes now, before a terminal UI starts
    return cache


def print_json(value: object) -> None:
    import json  # only for --json: the text answer does without it

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
        self._stage_done = 0  # what was done when the stage was first reported (a scan started before may be far on)
        self._done = 0  # the last report's
        self._shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage != self._stage or done < self._done:  # a new stage, or the reading begun again
            self._stage, self._stage_start, self._stage_done = stage, now, done
        self._done = done
        finished = total and done >= total
        if now - self._last < 0.1 and not finished:
            return
        self._last = now
        text = f"{stage} {100 * done / total:5.1f}%" if total else stage
        elapsed = now - self._stage_start
        if stage == "reading" and elapsed > 0.2 and done > self._stage_done:
            rate = (done - self._stage_done) / elapsed
            text += f"  {rate / 1e6:6.1f} MB/s"
            if not finished:
                text += f"  {max(0.0, (total - done) / rate):4.0f} s left"
        sys.stderr.write(f"\r\x1b[2K{text}")
        sys.stderr.flush()
        self._shown = True
        if stage == "indexing" and finished:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
