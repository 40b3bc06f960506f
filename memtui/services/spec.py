"""What one analysis is, for every front end: :class:`AnalysisSpec`.

A spec names the analysis, the explorer key that opens it (None: the explorer shows it
another way, or not at all), what it reads (:data:`Subject`), its options class (see
:mod:`memtui.services.options`) and its service function. The front ends make their
command, key and tool from it; :mod:`memtui.services.catalog` holds the table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memtui.report.sections import Report
from memtui.services.options import FrontEnd, Option, options_of

# What a service reads: one opened snapshot; two (a and b, maybe the same file); or a list of
# rank files, which it summarises itself (in worker processes, through the summary cache).
Subject = Literal["snapshot", "pair", "rank_files"]


class Result(Protocol):
    """What every service returns."""

    def to_json(self) -> Any:
        """The documented ``--json`` value."""

    def report(self) -> Report:
        """The sections the command line prints and the explorer lays out."""


@dataclass(frozen=True)
class AnalysisSpec:
    """One analysis as every front end offers it: its command, options and service."""

    name: str  # the command: ``memtui NAME``
    help: str  # one paragraph: the command's help and the tool's description
    module: str  # the service module, in memtui.services: imported when first asked for (see below)
    options_name: str  # its frozen dataclass of :func:`memtui.services.options.option` fields
    service_name: str  # its function: (subject..., options[, progress]) -> Result
    subject: Subject = "snapshot"
    key: str | None = None  # the explorer's key, or None
    key_help: str = ""  # the explorer's words for the key (footer, help, palette)
    tool: str = ""  # the MCP tool's name; empty: the analysis's name
    tool_help: str = ""  # the MCP tool's description when it says more than ``help``
    # The service takes ``progress=(stage, done, total)`` for work that takes a while past the load.
    reports_progress: bool = False

    @property
    def options(self) -> type:
        return getattr(self._module(), self.options_name)  # type: ignore[no-any-return]

    @property
    def service(self) -> Callable[..., Any]:
        return getattr(self._module(), self.service_name)  # type: ignore[no-any-return]

    def _module(self) -> Any:
        return importlib.import_module(f"memtui.services.{self.module}")

    @property
    def tool_name(self) -> str:
        return self.tool or self.name

    def option_list(self, front_end: FrontEnd | None = None) -> list[Option]:
        """The options, or those ``front_end`` offers."""
        return [o for o in options_of(self.options) if front_end is None or front_end in o.front_ends]
