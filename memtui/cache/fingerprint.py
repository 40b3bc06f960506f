"""The identity of a snapshot file for caching: size, modification time and its two ends.

Size and mtime catch every ordinary rewrite; the hash of the first and last bytes
catches the rest (a copy that kept the time stamp, a file rewritten within the
file system's time resolution) without reading the whole file, which for a 1 GB
snapshot would cost more than the cache saves.
"""

from __future__ import annotations

import os

from memtui.load.regular_file import open_regular_file

EDGE_BYTES = 1 << 20  # hashed at each end of the file


def file_fingerprint(path: str | os.PathLike, salt: str, edge: int = EDGE_BYTES) -> str:
    """40 hex digits naming ``path``'s current content together with ``salt`` (what the
    cached thing depends on besides the file: a format, a schema, options)."""
    import hashlib  # here, not at the top: it loads OpenSSL, and a start that reads no cache needs none of it

    with open_regular_file(path) as fh:  # a pipe is refused (an OSError), not waited on
        st = os.fstat(fh.fileno())
        digest = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{salt}:".encode())
        digest.update(fh.read(edge))
        if st.st_size > 2 * edge:
            fh.seek(st.st_size - edge)
            digest.update(fh.read(edge))
    return digest.hexdigest()[:40]
