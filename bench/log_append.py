"""Append throughput of 16 KiB v2 batches through `Log.append` next to plain `os.write`.

Same bytes, same count, same directory, interleaved runs in one process; prints the median
of each and the ratio (goal >= 0.8). The baseline writes the same kind of buffers the Log
variant gets (one distinct bytearray per batch), not one cache-hot buffer over and over.
Two Log variants: a writable bytearray per batch (the
broker's request buffer: offsets stamped in place) and immutable bytes (copied once).

    python bench/log_append.py [--batches 16384] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder


def make_batch() -> bytes:
    b = RecordBatchBuilder()
    ts = int(time.time() * 1000)
    while b.size_in_bytes() < 16 * 1024 - 120:
        b.append(ts, None, b"x" * 100)
    return b.build()


def run_os_write(d: Path, bufs: list) -> float:
    fd = os.open(d / "plain.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write = os.write
    t0 = time.perf_counter()
    for buf in bufs:
        write(fd, buf)
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt


def run_log(d: Path, bufs: list, cfg: LogConfig) -> float:
    log = Log(d / "bench-0", cfg, needs_recovery=False)
    append = log.append
    t0 = time.perf_counter()
    for buf in bufs:
        append(buf)
    dt = time.perf_counter() - t0
    log.close()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    batch = make_batch()
    n = args.batches
    total = len(batch) * n
    cfg = LogConfig(segment_bytes=128 * 1024 * 1024)
    print(f"{n} batches x {len(batch)} B = {total / 1e6:.0f} MB per run, "
          f"segment.bytes={cfg.segment_bytes}")
    res: dict[str, list[float]] = {"os.write": [], "Log bytearray": [], "Log bytes": []}
    root = Path(tempfile.mkdtemp(prefix="kafkactl-bench-", dir=os.environ.get("BENCH_DIR")))
    try:
        for _ in range(args.runs):
            for name in res:
                d = root / name.replace(" ", "_").replace(".", "_")
                d.mkdir()
                if name == "os.write":
                    dt = run_os_write(d, [bytearray(batch) for _ in range(n)])
                elif name == "Log bytearray":
                    dt = run_log(d, [bytearray(batch) for _ in range(n)], cfg)
                else:
                    dt = run_log(d, [batch] * n, cfg)
                res[name].append(dt)
                shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(res["os.write"])
    for name, times in res.items():
        med = statistics.median(times)
        print(f"{name:14s} median {med * 1e3:8.1f} ms  {total / med / 1e6:8.0f} MB/s  "
              f"{n / med:9.0f} batches/s  {med / n * 1e6:6.2f} us/batch  "
              f"ratio vs os.write {base / med:5.2f}")


if __name__ == "__main__":
    main()
