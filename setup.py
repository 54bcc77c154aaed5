"""The optional compiled kernels (kafkactl/record/_kernels.pyx, Cython). Everything else is
declared in pyproject.toml. The build never fails for their sake: without Cython or a C
compiler kafkactl installs as pure Python and says so once (`kafkactl --version` tells
which is in use)."""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = [("kafkactl.record._kernels", "kafkactl/record/_kernels.pyx"),
           ("kafkactl.protocol._codec_kernels", "kafkactl/protocol/_codec_kernels.pyx"),
           ("kafkactl.log._log_kernels", "kafkactl/log/_log_kernels.pyx")]


_said: list[str] = []


def _say(message: str) -> None:
    """Say once why the kernels are left out (the first reason is the one that matters)."""
    if not _said:
        _said.append(message)
        print(f"kafkactl: {message}; installing the pure-Python code only "
              "(slower; `kafkactl --version` says so)", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that leaves the kernels out when they cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all (DistutilsPlatformError and kin)
            _say(f"cannot build the compiled kernels ({e})")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # the compiler failed (CompileError, LinkError)
            _say(f"cannot compile {ext.name} ({e})")


def _extensions() -> list[Extension]:
    if os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0"):
        _say("KAFKACTL_NO_EXTENSIONS is set")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        _say("Cython is not installed")
        return []
    extensions = [Extension(name, [source])
                  for name, source in KERNELS]
    try:
        return list(cythonize(extensions, language_level=3, quiet=True))
    except Exception as e:  # a Cython that cannot translate the .pyx
        _say(f"Cython cannot translate the kernels ({e})")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
