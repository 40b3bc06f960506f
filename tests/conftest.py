"""Shared test fixtures.

Two sources of real snapshots: the project's own ``sample_snapshots/`` (always present,
so tests on them always run) and ``../shared/snapshots`` next to the checkout (real
files with ``*.truth.json`` ground truth; tests using them skip cleanly when absent).
"""

from __future__ import annotations

import functools
import json
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests are deterministic by default (the same cases on every run, no example
# database), so a green run means the code, not the draw. MEMTUI_FUZZ_EXAMPLES (a long run)
# or MEMTUI_HYPOTHESIS=random explores new cases; a failure they find becomes an explicit example.
hypothesis_settings.register_profile("fixed", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("random", derandomize=False, database=None, print_blob=True)
_RANDOM = os.environ.get("MEMTUI_HYPOTHESIS") == "random" or "MEMTUI_FUZZ_EXAMPLES" in os.environ
hypothesis_settings.load_profile("random" if _RANDOM else "fixed")


def _no_constants_from_loaded_modules() -> None:
    """Hypothesis mixes into what it draws constants read from the project's modules loaded
    so far; which are loaded depends on the tests a worker ran before, so a fuzz test drew
    other cases in another order (and under --dist worksteal the order changes from run to
    run). The fixed profile draws from none: the same cases whatever ran first."""
    from hypothesis.internal.conjecture import providers

    none = providers.Constants()
    providers._get_local_constants = lambda: none


if not _RANDOM:
    _no_constants_from_loaded_modules()

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_snapshots"
SHARED = Path(os.environ.get("MEMTUI_SHARED_SNAPSHOTS", ROOT.parent / "shared" / "snapshots"))


def uncompressed_sample(folder: Path, name: str = "oom_training") -> Path:
    """The bundled sample ``name`` written uncompressed into ``folder`` (what the compiled
    scanner reads with its workers, and the scan or checks started before the imports see)."""
    path = folder / f"{name}.pickle"
    with lzma.open(SAMPLES / f"{name}.pickle.xz") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def shared_files(pattern: str = "*.pickle*") -> list[Path]:
    """Real snapshots in ../shared/snapshots (empty when the folder is absent)."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.glob(pattern) if not p.name.endswith(".json"))


# Truth sets with files of their own tests (many files, some of 80,000 events): every test that
# runs over all samples would otherwise run over them too.
# The held-out sets, in the order they were recorded (sample_snapshots/heldout*/README.md).
HELDOUT_SETS = ("heldout", "heldout2", "heldout3", "heldout4")
_OWN_TESTS = {"scenarios", "whatif", "whatif2", *HELDOUT_SETS}


def terminal_env(**extra: str) -> dict[str, str]:
    """The environment for a program in a tmux pane of a given size, with ``extra`` set.

    COLUMNS and LINES are left out: where they are exported (some CI runners do),
    shutil.get_terminal_size() and so Textual take them over the pane's real size.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(extra)
    return env


def sample_files() -> list[Path]:
    """The bundled real snapshots, without the truth sets (see scenario_files, whatif_files,
    heldout_files)."""
    return sorted(p for p in SAMPLES.rglob("*.pickle*") if not _OWN_TESTS & set(p.parts))


def scenario_files() -> list[Path]:
    """The recorded scenarios with a known cause (sample_snapshots/scenarios, each with its truth)."""
    return sorted((SAMPLES / "scenarios").glob("*.pickle*"))


def whatif_files() -> list[Path]:
    """Recordings re-run under other allocator settings (sample_snapshots/whatif and whatif2,
    each with its truth)."""
    return sorted(p for folder in ("whatif", "whatif2") for p in (SAMPLES / folder).glob("*.pickle*"))


def heldout_files() -> list[Path]:
    """Recordings from programs written apart from the analyses (sample_snapshots/heldout and
    the later sets, heldout2 and heldout3)."""
    return sorted(p for folder in HELDOUT_SETS for p in (SAMPLES / folder).glob("*.pickle*"))


def truth_for(path: Path) -> dict:
    name = path.name.split(".pickle")[0]
    return json.loads((path.parent / f"{name}.truth.json").read_text())


def shared_params(pattern: str = "*.pickle*"):
    """pytest params over the shared snapshots, or one skipped param when there are none."""
    files = shared_files(pattern)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no real snapshots at {SHARED}"))]
    return [pytest.param(p, id=p.name) for p in files]


def require(path: Path | None) -> Path:
    if path is None or not path.exists():
        pytest.skip(f"snapshot not available: {path}")
    return path


@pytest.fixture(scope="session")
def big_trace(tmp_path_factory) -> Path:
    """The 1,000,000-event shared snapshot (decompressed once per test session)."""
    src = SHARED / "big_trace.pickle.xz"
    if not src.exists():
        pytest.skip(f"1M-event snapshot not available at {src}")
    out = tmp_path_factory.mktemp("big") / "big_trace.pickle"
    with lzma.open(src) as fin, open(out, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return out


@pytest.fixture
def live_dir(monkeypatch):
    """A private runtime folder for live jobs' sockets (short: a Unix socket's path must fit in about 100 bytes)."""
    folder = tempfile.mkdtemp(prefix="mtl", dir="/tmp")
    monkeypatch.setenv("MEMTUI_RUNTIME_DIR", folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"no real snapshots at {SHARED}")
    return SHARED


@pytest.fixture(autouse=True, scope="session")
def _private_cache_home(tmp_path_factory):
    """Commands run by tests cache models in a throwaway folder, never the user's."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


def pytest_sessionfinish(session):
    """A test worker (pytest-xdist) hands its fuzz case counts to the controller, which prints them."""
    from tests.fixtures.snapshot_strategies import CASES_RUN

    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["fuzz_cases"] = dict(CASES_RUN)


def pytest_testnodedown(node, error):
    from tests.fixtures.snapshot_strategies import CASES_RUN

    CASES_RUN.update(getattr(node, "workeroutput", {}).get("fuzz_cases", {}))


def pytest_terminal_summary(terminalreporter):
    """How many fuzz cases ran (set MEMTUI_FUZZ_EXAMPLES for a long run)."""
    from tests.fixtures.snapshot_strategies import CASES_RUN

    if CASES_RUN:
        parts = ", ".join(f"{name} {count:,}" for name, count in sorted(CASES_RUN.items()))
        terminalreporter.write_line(f"fuzz cases run: {sum(CASES_RUN.values()):,} ({parts})")


# Names a test's own code uses to reach ../shared/snapshots (directly or through a helper).
_SHARED_NAMES = ("SHARED", "shared(", "shared_files(", "shared_params(", "OOM_REAL", "OOM_TRAINING", "big_trace",
                 "shared_dir")


def _uses_shared(item) -> bool:
    """Whether a test reads the real snapshots next to the checkout: a parameter under
    SHARED, a fixture that provides them, or its own source naming them."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(isinstance(v, Path) and SHARED in v.parents for v in callspec.params.values()):
        return True
    if {"big_trace", "shared_dir"} & set(getattr(item, "fixturenames", ())):
        return True
    function = getattr(item, "function", None)
    return function is not None and _names_shared(function)


@functools.cache
def _names_shared(function) -> bool:
    """Whether a test function's source names the real snapshots: read once per function,
    not once per parameter (a source read costs a millisecond; there are thousands of items)."""
    import inspect

    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    return any(name in source for name in _SHARED_NAMES)


def pytest_collection_modifyitems(config, items):
    """Every test that reads ../shared/snapshots carries the `shared` marker, so that
    `-m "not shared"` leaves all of them out; without the folder they skip, saying why."""
    missing = not SHARED.is_dir()
    for item in items:
        if item.get_closest_marker("shared") is None and _uses_shared(item):
            item.add_marker(pytest.mark.shared)
        if missing and item.get_closest_marker("shared") is not None:
            item.add_marker(pytest.mark.skip(reason=f"no real snapshots at {SHARED}"))
