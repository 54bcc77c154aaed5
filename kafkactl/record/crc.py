"""Checksums: CRC-32C (Castagnoli, magic 2 batches) and CRC-32 (IEEE, magic 0/1 messages).

`crc32c` uses the PyPI `crc32c` package, which runs the SSE4.2 / ARMv8 instruction when the
CPU has it (see bench/crc.py for the figures against crcmod and zlib). Both functions accept
any buffer (bytes, bytearray, memoryview slices) without copying.

The package's `__init__` asks `importlib.metadata` for its own version, which costs every
kafkactl process ~25 ms of start-up (a fifth of a short command's CPU); its C module is
loaded directly when it can be, and through the package otherwise.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import zlib
from collections.abc import Callable

Crc = Callable[[bytes | bytearray | memoryview, int], int]


def _load_crc32c() -> Crc:
    try:
        package = importlib.util.find_spec("crc32c")  # finds, does not import, the package
        if package is not None and package.submodule_search_locations:
            spec = importlib.machinery.PathFinder.find_spec(
                "crc32c._crc32c", list(package.submodule_search_locations))
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                fn: Crc = module.crc32c
                return fn
    except (ImportError, OSError, AttributeError):
        pass
    from crc32c import crc32c as packaged

    return packaged


_crc32c = _load_crc32c()

__all__ = ["crc32", "crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of `data`, continuing from `value`; an unsigned 32-bit int."""
    return _crc32c(data, value)


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32 (zlib / IEEE 802.3) of `data`, continuing from `value`; unsigned 32-bit."""
    return zlib.crc32(data, value)
