"""Watching a running job: the live protocol, the job's server (without torch), the watcher's state.

Pure: nothing here imports torch or textual. The torch side is :mod:`memtui.record.serving`;
the view is :mod:`memtui.tui.watch_app`.
"""
