"""Where memtui.mcp finds the shortened rank table; the ranks' text is memtui.report.ranks."""

from __future__ import annotations

from memtui.report.ranks import shortened as shortened
