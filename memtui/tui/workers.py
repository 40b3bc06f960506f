"""The explorer's workers: Textual's ``@work`` on a thread, described by the method's name.

Textual describes a worker started from a decorated method by the repr of the method's
arguments, made on the thread that draws the screen, as the worker starts. The repr of a
view of a ten-million-event trace is numpy printing its columns: 0.16 s that the first
screen waited for, each time the explorer opened. Every worker is declared here instead,
with its method's name as its description, so no argument is ever printed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from textual import work
from textual.worker import Worker

P = ParamSpec("P")
R = TypeVar("R")


def thread_work(*, group: str, exclusive: bool = False,
                exit_on_error: bool = True) -> Callable[[Callable[P, R]], Callable[P, Worker[R]]]:
    """``@work(thread=True, ...)`` with the method's name as the worker's description."""

    def declare(method: Callable[P, R]) -> Callable[P, Worker[R]]:
        return work(method, thread=True, group=group, exclusive=exclusive, exit_on_error=exit_on_error,
                    description=method.__name__)

    return declare
