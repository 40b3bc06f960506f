"""Summarising many rank files on many workers: here, in local processes, or on Dask.

The work per file is :func:`memtui.fleet.task.keyed_summary`: open one snapshot, return
its cache key and its summary (kilobytes). A runner spreads those calls over workers;
:func:`memtui.fleet.collect.collect_summaries` decides which files need one at all
(the rest come from the summary cache), stores what comes back, and reports progress.
Only :mod:`memtui.fleet.dask_runner` imports Dask, and only when a cluster is asked for.
"""
