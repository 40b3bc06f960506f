"""The explorer's workers never print their arguments as they start.

Textual describes a worker started from a ``@work`` method by the repr of its arguments, made
on the thread that draws the screen. A view's repr is numpy printing its columns: at ten
million events, 0.16 s that the first screen waited for. Workers are declared through
memtui/tui/workers.py, which describes each by its method's name.
"""

from __future__ import annotations

import re
from pathlib import Path

import memtui
from memtui.tui.views.device_view import DeviceView
from memtui.tui.workers import thread_work
from tests.tui.helpers import make_app, ready, settle, tiny_path

PACKAGE = Path(memtui.__file__).parent


async def test_opening_the_explorer_never_prints_the_view(monkeypatch):
    from textual.dom import DOMNode

    printed: list[str] = []
    described: list[str] = []
    monkeypatch.setattr(DeviceView, "__repr__", lambda self: printed.append("view") or "DeviceView(...)")
    start = DOMNode.run_worker

    def noting(node, work, *args, **kwargs):
        described.append(kwargs.get("description", ""))
        return start(node, work, *args, **kwargs)

    monkeypatch.setattr(DOMNode, "run_worker", noting)
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await settle(app, pilot)  # the time-travel index's worker, started with the view, has run
    assert printed == []
    assert "_index_view" in described and all("(" not in text for text in described)


def test_a_worker_is_described_by_its_methods_name():
    class Costly:
        def __repr__(self) -> str:
            raise AssertionError("printed")

    started: list[dict] = []

    class Host:
        def run_worker(self, work, **options):
            started.append(options)

    @thread_work(group="g")
    def index(self, view) -> None:
        pass

    from textual.dom import DOMNode

    host = DOMNode()
    host.run_worker = Host().run_worker  # type: ignore[method-assign]
    index(host, Costly())
    assert started[0]["description"] == "index" and started[0]["thread"] is True and started[0]["group"] == "g"


def test_every_worker_is_declared_through_the_one_helper():
    # Read as text (parsing every module took a second): an import of Textual's work, alone or
    # among other names, is a line "from textual import ..." naming it.
    importing_work = re.compile(r"^\s*from textual import [^#\n]*\bwork\b", re.MULTILINE)
    offenders = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                 if path != PACKAGE / "tui" / "workers.py" and importing_work.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
