"""Where live jobs serve: one private folder per user, one socket and one descriptor per process.

The folder is ``$MEMTUI_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/memtui``, else
``/tmp/memtui-UID``. It is made owner-only (0700) and refused if it belongs to someone
else or others may enter it: a socket there is reachable by its owner alone, which is the
whole of the access control for local watching.

A job writes ``job-PID.sock`` (``job-PID.rankN.sock`` under a launcher) and beside it
``job-PID….json``, its descriptor: pid, rank, devices, start time, command line. A watcher
lists the descriptors, drops those whose process is gone, and connects to the sockets.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from dataclasses import asdict, dataclass, field

from memtui.atomic import remove_quietly, write_bytes_atomic
from memtui.errors import UsageError

ENV_DIR = "MEMTUI_RUNTIME_DIR"


def runtime_dir(create: bool = True) -> str:
    """The private folder, made (0700) if ``create``; raises UsageError if it is not private."""
    chosen = os.environ.get(ENV_DIR)
    if not chosen:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isdir(xdg):
            chosen = os.path.join(xdg, "memtui")
        else:
            chosen = os.path.join(tempfile.gettempdir(), f"memtui-{os.getuid()}")
    if create:
        try:
            os.makedirs(chosen, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot make the live folder {chosen} ({exc.strerror or exc})") from None
    if os.path.isdir(chosen):
        check_private(chosen)
    return chosen


def check_private(path: str) -> None:
    """Refuse a folder another user owns or may enter (a socket in it would be theirs to reach)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"the live folder {path} is not a plain folder")
    if info.st_uid != os.getuid():
        raise UsageError(f"the live folder {path} belongs to another user; set {ENV_DIR} to a folder of yours")
    if info.st_mode & 0o077:
        raise UsageError(f"the live folder {path} is open to other users (mode {info.st_mode & 0o777:o}); "
                         "memtui wants 700")


@dataclass
class JobInfo:
    """A live job's descriptor."""

    pid: int
    socket: str
    rank: int | None = None
    world_size: int | None = None
    devices: list[int] = field(default_factory=list)
    started: float = 0.0  # seconds since the epoch
    argv: list[str] = field(default_factory=list)
    job: str = ""  # what groups the ranks of one launch (torchrun's run id, else the pid)
    host: str = ""

    @property
    def name(self) -> str:
        rank = f" rank {self.rank}" if self.rank is not None else ""
        script = os.path.basename(self.argv[0]) if self.argv else "?"
        return f"{script} (pid {self.pid}{rank})"

    def running_for(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.started)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> JobInfo:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def endpoint_stem(pid: int, rank: int | None) -> str:
    return f"job-{pid}" + (f".rank{rank}" if rank is not None else "")


def socket_path(folder: str, pid: int, rank: int | None) -> str:
    return os.path.join(folder, endpoint_stem(pid, rank) + ".sock")


def descriptor_path(socket: str) -> str:
    return socket[: -len(".sock")] + ".json" if socket.endswith(".sock") else socket + ".json"


def write_descriptor(info: JobInfo) -> str:
    path = descriptor_path(info.socket)
    write_bytes_atomic(path, json.dumps(info.to_json()).encode(), force=True)
    return path


def remove_endpoint(socket: str) -> None:
    remove_quietly(socket)
    remove_quietly(descriptor_path(socket))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_jobs(folder: str | None = None, clean: bool = True) -> list[JobInfo]:
    """The live jobs whose descriptor and socket are there and whose process runs, oldest first.

    A descriptor left by a process that died (killed with SIGKILL, say) is removed with its
    socket when ``clean``.
    """
    folder = folder or runtime_dir(create=False)
    if not os.path.isdir(folder):
        return []
    found = []
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("job-") and name.endswith(".json")):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as fh:
                info = JobInfo.from_json(json.load(fh))
        except (OSError, ValueError, TypeError):
            continue
        if not process_alive(info.pid) or not os.path.exists(info.socket):
            if clean:
                remove_endpoint(info.socket if info.socket else path[:-5] + ".sock")
            continue
        found.append(info)
    found.sort(key=lambda j: (j.started, j.job, j.rank if j.rank is not None else -1))
    return found


def select_jobs(jobs: list[JobInfo], target: str | None) -> list[JobInfo]:
    """The jobs ``target`` names: a pid, ``PID:RANK``, a socket path, a job id, or a piece of the
    command line; without a target, the ranks of the newest job. Several ranks of one job come
    back together."""
    if not jobs:
        return []
    if target is None:
        newest = jobs[-1]
        return [j for j in jobs if j.job == newest.job]
    text = target.strip()
    if text.endswith(".sock") or os.sep in text:
        return [j for j in jobs if os.path.abspath(j.socket) == os.path.abspath(text)]
    pid, _, rank = text.partition(":")
    if pid.isdigit():
        chosen = [j for j in jobs if j.pid == int(pid)]
        if rank.isdigit():
            return [j for j in chosen if j.rank == int(rank)]
        if len(chosen) == 1:  # one rank named by its pid: show its whole job
            return [j for j in jobs if j.job == chosen[0].job]
        return chosen
    by_job = [j for j in jobs if j.job == text]
    if by_job:
        return by_job
    return [j for j in jobs if text in " ".join(j.argv)]
