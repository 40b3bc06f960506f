"""Analysis results as structured sections: lines, typed rows, notes and evidence.

The commands print these sections and the explorer's screens lay them out; neither parses
the other's text. Pure: imports the model and the analyses, never textual or torch.
"""
