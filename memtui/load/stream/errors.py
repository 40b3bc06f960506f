"""Why the streaming decoder gave a file back to the plain loader."""

from __future__ import annotations


class StreamFallback(Exception):
    """The file is not laid out the way the streaming decoder expects; use the plain path.

    Never user-facing: the plain path reads the file again and either builds the model
    or raises the one-line SnapshotError.
    """
