"""Read throughput of a whole log by `Log.read` slices, next to plain sequential pread.

Builds a log of 16 KiB v2 batches (several segments), then in the same run: (1) pread of
the segment files in 1 MiB chunks (baseline), (2) `Log.read(offset, 1 MiB)` + `read_bytes()`
walking offsets to the end, (3) `Log.read` slices only (what the broker sendfiles), and
(4) `Log.read` + os.sendfile of each slice into /dev/null.

    python bench/log_read.py [--mib 512] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder

CHUNK = 1024 * 1024


def timed(fn: Callable[[], int], runs: int) -> tuple[float, int]:
    times, out = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    b = RecordBatchBuilder()
    while b.size_in_bytes() < 16 * 1024 - 120:
        b.append(int(time.time() * 1000), None, b"x" * 100)
    batch = b.build()
    root = Path(tempfile.mkdtemp(prefix="kafkactl-bench-", dir=os.environ.get("BENCH_DIR")))
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        log = Log(root / "bench-0", LogConfig(segment_bytes=128 * 1024 * 1024))
        for _ in range(args.mib * 1024 * 1024 // len(batch)):
            log.append(batch)
        total = log.size_in_bytes
        end = log.log_end_offset

        def baseline() -> int:
            n = 0
            for seg in log.segments:
                pos = 0
                while pos < seg.size:
                    n += len(os.pread(seg.fd, CHUNK, pos))
                    pos += CHUNK
            return n

        fds = {seg.fd: seg for seg in log.segments}

        def by_slices(mode: str) -> int:
            n, offset = 0, 0
            while offset < end:
                s = log.read(offset, CHUNK)
                if mode == "bytes":
                    data = s.read_bytes()
                elif mode == "sendfile":
                    sent = 0
                    while sent < s.length:
                        sent += os.sendfile(devnull, s.fd, s.position + sent, s.length - sent)
                    data = None
                else:
                    data = None
                n += s.length
                # the next fetch starts after the last whole batch of this slice
                seg = fds[s.fd]
                tail = s.position + s.length
                whole = [h for h in seg.headers_from(s.position, tail)
                         if h.position + h.size <= tail]
                offset = whole[-1].last_offset + 1 if whole else end
                del data
            return n

        rows = [("pread 1 MiB chunks (baseline)", timed(baseline, args.runs))]
        for mode in ("bytes", "sendfile", "slices"):
            rows.append((f"Log.read 1 MiB + {mode}", timed(lambda m=mode: by_slices(m),
                                                           args.runs)))
        base = rows[0][1][0]
        print(f"log: {total / 1e6:.0f} MB in {len(log.segments)} segments, {end} records")
        for name, (dt, n) in rows:
            print(f"{name:34s} {dt * 1e3:8.1f} ms  {n / dt / 1e9:6.2f} GB/s  "
                  f"ratio vs baseline {base / dt:5.2f}")
        log.close()
    finally:
        os.close(devnull)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
