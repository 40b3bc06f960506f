"""``memtui mcp``: the snapshot analyses as tools for coding agents, over the Model Context Protocol.

:mod:`memtui.mcp.store` opens snapshots (only under the allowed folders, kept between
calls), :mod:`memtui.mcp.tools` answers each tool with the JSON of the matching ``--json``
command plus a short summary, and :mod:`memtui.mcp.server` is the only module that
imports the MCP SDK (``pip install 'memtui[mcp]'``). Nothing here imports Textual.
"""
