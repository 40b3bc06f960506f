"""The user's own category rules: a small TOML file, applied before the built-in rules.

    # $XDG_CONFIG_HOME/memtui/categories.toml, or memtui breakdown --categories FILE
    [[rule]]
    category = "kv_cache"                # a name of your own, or a built-in one
    file = "*/transformers/cache_utils.py"
    function = "update"

    [[rule]]
    category = "parameters"
    function = "load_my_checkpoint"

An allocation takes the category of the first rule that matches it. A rule matches when
one frame of the allocating stack matches every frame field the rule gives (``file``,
``function``, ``frame``) and, when it gives ``metadata``, the allocation's
``user_metadata`` matches that. Fields are shell-style patterns (``*``, ``?``, ``[...]``),
case-sensitive: ``file`` without a ``/`` matches the file's base name, with one it
matches the end of the path; ``frame`` matches ``file:line function`` as the stack view
prints it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import ModuleType
from typing import cast

import numpy as np

from memtui.errors import UsageError
from memtui.model.frames import StackTable
from memtui.model.strings import StringTable

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
_FIELDS = ("file", "function", "frame", "metadata")
MAX_RULES = 1000


@dataclass(frozen=True)
class CategoryRule:
    category: str
    file: str | None = None
    function: str | None = None
    frame: str | None = None
    metadata: str | None = None

    def describe(self) -> str:
        given = [f"{key} = {getattr(self, key)!r}" for key in _FIELDS if getattr(self, key) is not None]
        return f"{self.category}: " + ", ".join(given)

    def matches_frame(self, filename: str, line: int, name: str) -> bool:
        if self.file is not None and not _file_matches(self.file, filename):
            return False
        if self.function is not None and not fnmatchcase(name, self.function):
            return False
        return self.frame is None or fnmatchcase(f"{filename}:{line} {name}", self.frame)

    @property
    def has_frame_fields(self) -> bool:
        return self.file is not None or self.function is not None or self.frame is not None


@dataclass
class CategoryRules:
    rules: list[CategoryRule] = field(default_factory=list)
    source: str = ""  # the file they came from, '' for none

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def categories(self) -> list[str]:
        """The category names the rules give, first use first."""
        return list(dict.fromkeys(rule.category for rule in self.rules))

    def match(self, stacks: StackTable, strings: StringTable, stack: np.ndarray, meta: np.ndarray) -> np.ndarray:
        """For allocations with these stack ids (-1: none) and user_metadata string ids
        (-1: none): the index of the first rule each matches, or -1."""
        out = np.full(len(stack), -1, np.int32)
        if not self.rules or not len(stack):
            return out
        frame_hit = self._frame_hits(stacks)  # (rules, stacks + 1)
        meta_ids = np.unique(meta[meta >= 0]) if len(meta) else np.zeros(0, np.int64)
        for k in range(len(self.rules) - 1, -1, -1):  # the first rule wins: apply it last
            rule = self.rules[k]
            ok = frame_hit[k][np.asarray(stack, np.int64) + 1] if rule.has_frame_fields else np.ones(len(stack), bool)
            if rule.metadata is not None:
                wanted = [int(m) for m in meta_ids if fnmatchcase(strings[int(m)], rule.metadata)]
                ok = ok & np.isin(meta, wanted)
            out[ok] = k
        return out

    def _frame_hits(self, stacks: StackTable) -> np.ndarray:
        frames = stacks.frames
        n_frames = len(frames)
        per_frame = np.zeros((len(self.rules), n_frames), bool)
        for fid in range(n_frames):
            filename, line, name = frames.filename_of(fid), int(frames.line[fid]), frames.name_of(fid)
            for k, rule in enumerate(self.rules):
                if rule.has_frame_fields and rule.matches_frame(filename, line, name):
                    per_frame[k, fid] = True
        hits = np.zeros((len(self.rules), len(stacks) + 1), bool)
        if not len(stacks) or not len(stacks.flat):
            return hits
        # Every stack's frames are one run of the flat array: one reduceat per rule.
        starts = np.minimum(stacks.offsets[:-1], len(stacks.flat) - 1)
        nonempty = stacks.offsets[1:] > stacks.offsets[:-1]
        for k in range(len(self.rules)):
            if per_frame[k].any():
                hits[k, 1:] = np.logical_or.reduceat(per_frame[k][stacks.flat], starts) & nonempty
        return hits


def _file_matches(pattern: str, filename: str) -> bool:
    path = filename.replace("\\", "/")
    if "/" not in pattern:
        return fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return fnmatchcase(path, pattern if pattern.startswith(("/", "*")) else "*/" + pattern) or \
        fnmatchcase(path, pattern)


def default_rules_path() -> str:
    """Where the rules are read from when no file is named: ``$XDG_CONFIG_HOME/memtui/categories.toml``
    (``~/.config`` when the variable is unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "memtui", "categories.toml")


def load_rules(path: str | None = None) -> CategoryRules:
    """The rules of ``path``, or of the default file when ``path`` is None (none if it does
    not exist). A named file that cannot be read, or a rule that makes no sense, is a
    UsageError naming the file."""
    if path is None:
        path = default_rules_path()
        if not os.path.isfile(path):
            return CategoryRules()
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the category rules ({exc.strerror or exc})") from None
    return parse_rules(data, path)


def parse_rules(data: bytes | str, source: str = "") -> CategoryRules:
    where = source or "category rules"
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        document = _toml().loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise UsageError(f"{where}: not valid TOML ({exc})") from None
    entries = document.get("rule", [])
    if not isinstance(entries, list):
        raise UsageError(f"{where}: 'rule' must be a list of tables ([[rule]])")
    unknown = sorted(set(document) - {"rule"})
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (rules are [[rule]] tables)")
    if len(entries) > MAX_RULES:
        raise UsageError(f"{where}: {len(entries):,} rules; at most {MAX_RULES:,}")
    rules = [_rule(entry, k, where) for k, entry in enumerate(entries, 1)]
    return CategoryRules(rules, source)


def _rule(entry: object, k: int, where: str) -> CategoryRule:
    if not isinstance(entry, dict):
        raise UsageError(f"{where}: rule {k} is not a table")
    extra = sorted(set(entry) - {"category", *_FIELDS})
    if extra:
        raise UsageError(f"{where}: rule {k} has an unknown key {extra[0]!r} "
                         f"(a rule has category and any of {', '.join(_FIELDS)})")
    category = entry.get("category")
    if not isinstance(category, str) or not _NAME.match(category):
        raise UsageError(f"{where}: rule {k} needs a category name (letters, digits, _ . -)")
    values = {}
    for key in _FIELDS:
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise UsageError(f"{where}: rule {k}: {key} must be a non-empty string")
        values[key] = value
    if all(v is None for v in values.values()):
        raise UsageError(f"{where}: rule {k} matches nothing: give file, function, frame or metadata")
    return CategoryRule(category, **values)


def _toml() -> ModuleType:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli
    except ImportError:  # pragma: no cover - a dependency on 3.10
        from memtui.errors import MissingDependencyError

        raise MissingDependencyError("reading category rules on Python 3.10 needs tomli: pip install tomli") from None
    return cast(ModuleType, tomli)  # a module; typed Any where tomli is not installed (Python 3.11 and later)
