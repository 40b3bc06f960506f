"""``list_snapshots``: the snapshot files under the server's roots, newest first.

An agent told "look at last night's run" needs the file's name before any other tool can
help. The walk stays inside the roots (a link leading out is not followed or listed),
skips hidden folders, and stops after ``MAX_VISITED`` entries so a root such as a home
folder answers in bounded time, saying it stopped.
"""

from __future__ import annotations

import os
import time

from memtui.errors import UsageError
from memtui.fleet.rank_files import is_snapshot_name
from memtui.mcp.answers import Answer
from memtui.mcp.store import SnapshotStore
from memtui.units import format_bytes, plural

MAX_VISITED = 20_000  # directory entries looked at per call
MAX_DEPTH = 8  # folders below a root


def list_snapshots(store: SnapshotStore, folder: str | None, contains: str, limit: int, offset: int) -> Answer:
    roots = [store.resolve(folder, directory_too=True)] if folder else store.roots
    if folder and not os.path.isdir(roots[0]):
        raise UsageError(f"{folder}: not a folder")
    found, visited, complete = [], 0, True
    for root in roots:
        for path, stat in _walk(root, store):
            visited += 1
            if visited > MAX_VISITED:
                complete = False
                break
            if path is not None and contains.lower() in os.path.basename(path).lower():
                found.append((stat.st_mtime, path, stat.st_size))
        if not complete:
            break
    found.sort(key=lambda f: (-f[0], f[1]))
    rows = [{"path": path, "size": size, "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime))}
            for mtime, path, size in found[offset:offset + limit]]
    more = offset + len(rows) < len(found)
    data = {"roots": roots, "total": len(found), "offset": offset, "files": rows, "truncated": more or not complete}
    if more:
        data["next_offset"] = offset + len(rows)
    lines = [f"{plural(len(found), 'snapshot file')} under {', '.join(roots)}"
             + ("" if complete else f" (the walk stopped after {MAX_VISITED:,} entries: name a folder to look deeper)")
             + (", newest first:" if rows else "")]
    lines += [f"  {r['modified']}  {format_bytes(r['size']):>10}  {r['path']}" for r in rows[:5]]
    if more:
        data["more"] = f"call again with offset={offset + len(rows)}"
        lines.append(data["more"])
    elif not complete:
        data["more"] = "give folder to list one folder of the roots"
    return Answer("\n".join(lines), data)


def _walk(root: str, store: SnapshotStore):
    """(path, stat) of each snapshot file under ``root`` (path None for other entries, so
    the caller counts them), breadth first, never leaving the roots."""
    pending = [(root, 0)]
    while pending:
        folder, depth = pending.pop(0)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                yield None, None
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH:
                        pending.append((entry.path, depth + 1))
                    yield None, None
                elif is_snapshot_name(entry.name):
                    real = store.resolve(entry.path)  # a link leading out of the roots is refused here
                    yield real, os.stat(real)
                else:
                    yield None, None
            except (OSError, UsageError):
                yield None, None
