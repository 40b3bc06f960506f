"""The architecture holds: imports point down the layers, and the pure layers load no UI and no torch.

The layers and the forbidden imports are the contracts in pyproject.toml
(``[tool.importlinter]``); ``lint-imports --no-cache`` prints the same report.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("importlinter", reason="import-linter is in the test extra: pip install -e '.[test]'")

LINT = ("import sys\n"
        "from importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename=sys.argv[1] or None, no_cache=True, no_logo=True))\n")

# Contracts the code breaks on purpose: the explorer imports the model, and imports textual.
BROKEN = """
[tool.importlinter]
root_packages = ["memtui"]
include_external_packages = true

[[tool.importlinter.contracts]]
name = "upside down"
type = "layers"
layers = ["memtui.model", "memtui.tui"]

[[tool.importlinter.contracts]]
name = "no textual in the explorer"
type = "forbidden"
source_modules = ["memtui.tui"]
forbidden_modules = ["textual"]
"""


def lint(config: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")  # one violation per line, unwrapped
    return subprocess.run([sys.executable, "-c", LINT, config], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_import_contracts_are_kept():
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_broken_contract_fails(tmp_path):
    config = tmp_path / "broken.toml"
    config.write_text(BROKEN)
    result = lint(str(config))
    assert result.returncode != 0
    assert "2 broken" in result.stdout, result.stdout + result.stderr
    assert "memtui.tui is not allowed to import memtui.model" in result.stdout
    assert "memtui.tui is not allowed to import textual" in result.stdout


def loaded_frameworks(code: str) -> set[str]:
    """Which of textual and torch a fresh interpreter has imported after running ``code``."""
    check = code + "\nimport sys\nprint(*sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'torch'}))"
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_the_model_analyses_and_command_line_load_neither_textual_nor_torch():
    code = "import memtui.model, memtui.analysis, memtui.query, memtui.cli\nmemtui.cli.command_modules()"
    assert loaded_frameworks(code) == set()


def test_no_module_of_the_pure_layers_loads_textual_or_torch():
    code = ("import importlib, pkgutil\n"
            "import memtui.open, memtui.replay\n"
            "for package in ('memtui.load', 'memtui.model', 'memtui.allocator', 'memtui.analysis', 'memtui.query',\n"
            "                'memtui.report', 'memtui.export', 'memtui.cache', 'memtui.fleet', 'memtui.live',\n"
            "                'memtui.tui.views'):\n"
            "    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + '.'):\n"
            "        importlib.import_module(info.name)")
    assert loaded_frameworks(code) == set()


def test_a_command_imports_its_own_analysis_and_no_other():
    # Every command pays for what it imports before it reads a byte: `memtui info` on a
    # cached model takes a third of a second, of which the other analyses were a fifth.
    code = ("import sys\nfrom memtui.cli import find_command\ncommand = find_command('info')\n"
            "own = command.spec.service.__module__\n"
            "loaded = [m for m in sys.modules if m.startswith('memtui.services.')]\n"
            "print(own, *sorted(m for m in loaded\n"
            "      if m.rsplit('.', 1)[1] not in ('spec', 'catalog', 'options', 'common')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["memtui.services.info", "memtui.services.info"]


def test_every_command_module_is_named_as_its_file():
    # The command line finds a command by its file's name without importing the others.
    from memtui.cli import command_modules

    for name, command in command_modules().items():
        assert command is not None and getattr(command, "NAME", name) == name, name


def test_info_imports_nothing_only_other_paths_need(tmp_path):
    # Every module a command imports is paid for at each start, before a byte is read
    # (a warm `memtui info` at 10M events takes about a third of a second): the modules
    # only writing a file, the slower decoders or other commands use are imported there.
    sample = ROOT / "sample_snapshots" / "context_none.pickle.xz"

    def imported(argv: list[str]) -> set[str]:
        result = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}

    # numpy 1.x imports secrets (numpy.random) itself: what numpy imports is not memtui's to spare
    not_needed = {"socket", "tempfile", "subprocess", "secrets", "pkgutil", "msgpack", "textual", "torch"}
    not_needed -= imported(["-c", "import numpy"])
    for run, writes in (("first", {"tempfile"}), ("warm", set())):  # the first writes the cache
        loaded = imported(["-m", "memtui", "info", "--cache-dir", str(tmp_path), str(sample)])
        assert not_needed & loaded == writes & not_needed, run
