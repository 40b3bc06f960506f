"""``memtui mcp``: the snapshot analyses as tools for coding agents, over the Model Context Protocol.

:mod:`memtui.mcp.store` opens snapshots (only under the allowed folders, kept between
calls), :mod:`memtui.mcp.tools` answers each tool with the JSON of its analysis's service
(memtui.services, the same the ``--json`` command prints) plus a short summary, within the
budget of :mod:`memtui.mcp.answers`, and :mod:`memtui.mcp.server` is the only module that
makes the tools (one per spec) and imports the MCP SDK (``pip install 'memtui[mcp]'``). Nothing here imports Textual.
"""
