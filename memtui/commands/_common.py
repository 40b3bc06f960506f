"""Pieces shared by the headless commands: opening with progress, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
import time

from memtui.errors import UsageError
from memtui.model import Snapshot, open_snapshot


def add_snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", help="snapshot file (.pickle, compressed, or a memtui .msgpack export)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def load(path: str) -> Snapshot:
    """Open a snapshot, with a progress line on stderr when it is a terminal."""
    return open_snapshot(path, progress=StderrProgress() if sys.stderr.isatty() else None)


def device_or_error(snapshot: Snapshot, device: int | None) -> int:
    if device is None:
        # The first device with anything in it, else 0.
        for dev in snapshot.devices:
            if len(dev.trace) or len(dev.segments):
                return dev.device
        return 0
    if not 0 <= device < len(snapshot.devices):
        raise UsageError(f"no device {device}; this snapshot has devices 0..{len(snapshot.devices) - 1}")
    return device


def print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


class StderrProgress:
    """A one-line progress display on stderr, redrawn at most ten times a second."""

    def __init__(self) -> None:
        self._last = 0.0
        self._shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total and done >= total
        if now - self._last < 0.1 and not finished:
            return
        self._last = now
        pct = f"{100 * done / total:5.1f}%" if total else ""
        sys.stderr.write(f"\r\x1b[2K{stage} {pct}")
        sys.stderr.flush()
        self._shown = True
        if stage == "indexing" and finished:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
