"""The explorer's pure half: what its panes show, computed without Textual.

Rows of the segment map, the event log's columns, the inspector's lines, the timeline's
plots, search and the filter's keys, where an analysis row leads: plain functions and
data over the model, tested without an app. An import-linter contract keeps textual
(and rich) out of this package; the widgets and screens around it draw what it returns.
"""
