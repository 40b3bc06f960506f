"""Builds the optional compiled part of memtui, ``memtui._native`` (src/memtui_native/).

Everything else is in pyproject.toml. The extension makes opening large snapshots fast
(docs/performance.md); memtui works the same without it, only slower. So its build never
fails the install: without a C compiler, or with one that fails, pip installs memtui
without it and says so. ``MEMTUI_NO_NATIVE=1`` at install time skips it on purpose.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

# One translation unit (native.c includes the others), so calls between the parts inline.
SOURCES = ["native.c"]
HEADERS = ["native.h", "scanner.h", "module.c", "scan.c", "entry.c", "large.c", "tables.c", "lifetimes.c", "columns.c",
           "curves.c", "allocator.c", "annotations.c", "parallel.c", "merge.c", "opcodes.c", "checksum.c", "reach.c"]


class OptionalBuildExt(build_ext):
    """build_ext that leaves an extension out, with one warning, when it cannot be built."""

    def run(self) -> None:
        if os.environ.get("MEMTUI_NO_NATIVE"):
            self._skip_all("MEMTUI_NO_NATIVE is set")
            return
        try:
            super().run()
        except Exception as exc:  # no compiler at all (DistutilsPlatformError and friends)
            self._skip_all(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # the compiler failed
            self._skip(ext, exc)

    def _skip_all(self, why: object) -> None:
        for ext in list(self.extensions):
            self._skip(ext, why)

    def _skip(self, ext: Extension, why: object) -> None:
        if ext in self.extensions:
            self.extensions.remove(ext)
        print(f"memtui: building {ext.name} failed ({why}); installing without it: memtui works the same, "
              "large snapshots open more slowly (see docs/performance.md)", file=sys.stderr)

    def get_outputs(self) -> list[str]:  # only what was built (editable installs list these)
        return [self.get_ext_fullpath(ext.name) for ext in self.extensions]


# MEMTUI_LIVE=1 serves any process that uses CUDA to `memtui watch` with no change to its code:
# this .pth, at the root of site-packages, imports memtui.record.autostart only when it is set.
LIVE_HOOK = "src/live_hook/memtui-live.pth"


class BuildPyWithLiveHook(build_py):
    """build_py that also puts the live hook's .pth at the top of the wheel."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            self.copy_file(LIVE_HOOK, os.path.join(self.build_lib, os.path.basename(LIVE_HOOK)))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            outputs.append(os.path.join(self.build_lib, os.path.basename(LIVE_HOOK)))
        return outputs


# Every warning is shown; MEMTUI_WERROR=1 (CI sets it) makes each one fail the build, which
# CI then notices because it requires the extension (MEMTUI_REQUIRE_NATIVE=1).
WARNINGS = ["-Wall", "-Wextra"] + (["-Werror"] if os.environ.get("MEMTUI_WERROR") == "1" else [])
# tools/sanitize.sh builds with sanitizers through MEMTUI_NATIVE_CFLAGS (and without -O2 there).
EXTRA = os.environ.get("MEMTUI_NATIVE_CFLAGS", "-O2").split()

native = Extension(
    "memtui._native",
    sources=[f"src/memtui_native/{name}" for name in SOURCES],
    depends=[f"src/memtui_native/{name}" for name in HEADERS],
    extra_compile_args=[*EXTRA, "-fvisibility=hidden", "-pthread", *WARNINGS] if os.name != "nt" else [],
    extra_link_args=["-pthread", *os.environ.get("MEMTUI_NATIVE_LDFLAGS", "").split()] if os.name != "nt" else [],
    optional=True,
)

setup(ext_modules=[native], cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithLiveHook})
