"""Analysis results as structured sections: lines, typed rows, notes and evidence.

The commands print these sections and the explorer's screens lay them out; neither parses
the other's text. Pure: imports the analyses' results, never textual or torch.

- ``sections``: the vocabulary (Report, Lines, Notes, Evidence, Table with typed Columns, Place)
- ``text``: a report as the commands print it
- ``format``: the small formatters they share (signed sizes, sparklines, a cell by its kind)
- ``oom``, ``cycles``, ``leaks``, ``diff``, ``ranks``: a report per analysis
"""
