"""Checksums: CRC-32C (Castagnoli, magic 2 batches) and CRC-32 (IEEE, magic 0/1 messages).

`crc32c` uses the PyPI `crc32c` package, which runs the SSE4.2 / ARMv8 instruction when the
CPU has it (see bench/crc.py for the figures against crcmod and zlib). Both functions accept
any buffer (bytes, bytearray, memoryview slices) without copying.
"""

from __future__ import annotations

import zlib

from crc32c import crc32c as _crc32c

__all__ = ["crc32", "crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of `data`, continuing from `value`; an unsigned 32-bit int."""
    return _crc32c(data, value)


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32 (zlib / IEEE 802.3) of `data`, continuing from `value`; unsigned 32-bit."""
    return zlib.crc32(data, value)
