"""The service layer: every question a front end asks, answered once.

Each analysis is one :class:`~memtui.services.spec.AnalysisSpec` in
:mod:`memtui.services.catalog` (its name, explorer key, options with their bounds and
help, and its service function) and one service function: an opened snapshot and typed
options in, a typed result out that knows its JSON (``to_json``) and its report sections
(``report``, :mod:`memtui.report`). The command line, the explorer and the MCP server are
generated from the same table and only present what the function returns, so they cannot
disagree on names, defaults or bounds. Pure: never imports textual or torch, nor any front
end.
"""
