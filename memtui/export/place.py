"""Where the explorer's export (`x`) may write.

In a terminal the user may write anywhere they can. A session served to a browser is
driven by whoever holds the page, so ``memtui serve`` either names one folder that
exports stay inside (``--export-dir``) or turns exports off; the explorer gets that as
its own ``--export-dir`` / ``--no-export`` options and every export goes through
:meth:`ExportPlace.resolve`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memtui.errors import UsageError

EXPORTS_OFF = "export is off in this served session (start memtui serve with --export-dir DIR to allow it)"


@dataclass(frozen=True)
class ExportPlace:
    """``root``: the folder exports must stay inside (None: anywhere); ``off``: why there are none."""

    root: str | None = None
    off: str | None = None

    @classmethod
    def inside(cls, folder: str) -> ExportPlace:
        if not os.path.isdir(folder):
            raise UsageError(f"--export-dir {folder}: not a directory")
        return cls(root=os.path.realpath(folder))

    def default_path(self, file_name: str) -> str:
        """``file_name`` in the export folder, or in the working directory when there is none."""
        return os.path.join(self.root, file_name) if self.root else os.path.abspath(file_name)

    def resolve(self, typed: str) -> str:
        """The absolute path an export named ``typed`` goes to; UsageError if it may not go there."""
        if self.off:
            raise UsageError(self.off)
        typed = typed.strip()
        if not typed:
            raise UsageError("give a file name")
        if self.root is None:
            return os.path.abspath(os.path.expanduser(typed))
        # Relative names are inside the folder; whatever was typed, the real path (links
        # followed, `..` gone) must still be, so neither `../x` nor a link leads out of it.
        path = os.path.normpath(os.path.join(self.root, typed))
        real = os.path.realpath(path)
        if real == self.root or os.path.commonpath([self.root, real]) != self.root:
            raise UsageError(f"exports from this session stay inside {self.root}: give a file name there")
        return path


ANYWHERE = ExportPlace()  # the terminal's explorer: wherever the user can write
