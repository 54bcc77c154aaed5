"""CRC throughput on 64 MiB: crc32c (PyPI, hardware CRC-32C) vs crcmod (CRC-32C, its C
extension when built) vs zlib.crc32 (CRC-32, the magic 0/1 checksum), in the same run.

    python bench/crc.py [--mib 64]

Justifies the design card's choice of `crc32c` for magic-2 batches and the recovery scan.
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from collections.abc import Callable

import crc32c


def best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data = os.urandom(args.mib << 20)
    view = memoryview(data)
    results: dict[str, float] = {}
    results["crc32c (pypi crc32c)"] = best_of(args.repeat, lambda: crc32c.crc32c(view))
    results["zlib.crc32 (CRC-32)"] = best_of(args.repeat, lambda: zlib.crc32(view))
    try:
        import crcmod.predefined

        fn = crcmod.predefined.mkCrcFun("crc-32c")
        assert fn(b"123456789") == crc32c.crc32c(b"123456789")
        import sys

        ext = "crcmod._crcfunext" in sys.modules  # its C extension was importable
        label = "crcmod crc-32c" + (" (C ext)" if ext else " (pure Python)")
        reps = args.repeat if ext else 1
        results[label] = best_of(reps, lambda: fn(data))
    except ImportError:
        print("crcmod not installed (pip install crcmod): skipped")
    base = results["crc32c (pypi crc32c)"]
    size = len(data)
    print(f"{args.mib} MiB of random bytes, best of {args.repeat}; "
          f"hardware CRC-32C: {crc32c.hardware_based}")
    for name, t in results.items():
        print(f"  {name:32s} {size / t / 1e9:8.2f} GB/s   crc32c is {t / base:6.1f}x faster")


if __name__ == "__main__":
    main()
