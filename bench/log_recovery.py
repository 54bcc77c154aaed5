"""Recovery scan of a page-cached segment (default 1 GiB of 16 KiB v2 batches).

Prints, in one run: CRC-32C over the file (the bound), `record.scan` alone, the full
`recover_segment` (scan + header walk + index rebuild), and `Log` open with recovery.
Goal: >= 1 GB/s for recover_segment.

    python bench/log_recovery.py [--mib 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from summary import Row, add_summary_option, write_summary

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.recovery import recover_segment
from kafkactl.log.segment import LogSegment
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.crc import crc32c
from kafkactl.record.memory_records import scan


def write_segment(path: Path, mib: int) -> tuple[int, int]:
    b = RecordBatchBuilder()
    while b.size_in_bytes() < 16 * 1024 - 120:
        b.append(int(time.time() * 1000), None, b"x" * 100)
    batch = bytearray(b.build())
    count = b.record_count
    n = mib * 1024 * 1024 // len(batch)
    off = 0
    with open(path, "wb") as f:
        for _ in range(n):
            struct.pack_into(">q", batch, 0, off)  # base offset: not under the CRC
            f.write(batch)
            off += count
    return n, off


def timed(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    add_summary_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kafkactl-bench-", dir=os.environ.get("BENCH_DIR")))
    try:
        part = root / "bench-0"
        part.mkdir()
        path = part / "00000000000000000000.log"
        n, end_offset = write_segment(path, args.mib)
        size = path.stat().st_size
        fd = os.open(path, os.O_RDONLY)
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        mv = memoryview(mm)
        crc32c(mv)  # page it in

        def crc_chunks() -> None:
            step = 16 * 1024
            for pos in range(0, size, step):
                crc32c(mv[pos:pos + step])

        results = {
            "crc32c, one call over the file": timed(lambda: crc32c(mv), args.runs),
            "crc32c, 16 KiB chunks": timed(crc_chunks, args.runs),
            "record.scan": timed(lambda: scan(mv, 0, expected_offset=0), args.runs),
        }
        cfg = LogConfig()

        def recover() -> None:
            seg = LogSegment(part, 0, cfg, created_ms=0)
            r = recover_segment(seg)
            assert r.valid_batches == n and r.bytes_truncated == 0
            seg.close()

        results["recover_segment (scan+walk+indexes)"] = timed(recover, args.runs)

        def open_log() -> None:
            log = Log(part, cfg, needs_recovery=True)
            assert log.log_end_offset == end_offset
            log.close()

        results["Log(...) open with recovery"] = timed(open_log, args.runs)
        mv.release()
        mm.close()
        os.close(fd)
        print(f"segment: {size / 1e6:.0f} MB, {n} batches of ~16 KiB, page-cached")
        for name, dt in results.items():
            print(f"{name:38s} {dt * 1e3:8.1f} ms  {size / dt / 1e9:6.2f} GB/s")
        gbs = size / results["recover_segment (scan+walk+indexes)"] / 1e9
        bound = size / results["crc32c, one call over the file"] / 1e9
        write_summary(args.summary_json, [Row(
            "6 keep: recovery", f"recover_segment of a {size / 1e6:.0f} MB segment", gbs,
            "GB/s", "crc32c over the same file", bound, gbs / bound, ">= 1 GB/s", gbs >= 1.0)])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
