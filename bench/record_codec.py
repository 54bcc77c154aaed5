"""Record codec throughput: our RecordBatchBuilder / RecordBatch reader / scan() against
kafka-python's DefaultRecordBatchBuilder / DefaultRecordBatch, measured in the same run.

    python bench/record_codec.py [--records N] [--value-size B] [--batch-records K]

Prints records/s for each and our/their ratio. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder, set_base_offset
from kafkactl.record.crc import crc32c
from kafkactl.record.memory_records import scan


def best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--batch-records", type=int, default=150, help="records per batch (~16 KiB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scan-mib", type=int, default=256)
    args = ap.parse_args()
    value = b"v" * args.value_size
    key = b"key-0001"
    n, k = args.records, args.batch_records
    ts = 1_700_000_000_000

    def ours() -> list[bytes]:
        out = []
        for start in range(0, n, k):
            b = RecordBatchBuilder()
            app = b.append
            for i in range(min(k, n - start)):
                app(ts + i, key, value)
            out.append(b.build())
        return out

    def theirs() -> list[bytes]:
        out = []
        for start in range(0, n, k):
            b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
            app = b.append
            for i in range(min(k, n - start)):
                app(i, ts + i, key, value, [])
            out.append(bytes(b.build()))
        return out

    t_ours = best_of(args.repeat, ours)
    t_theirs = best_of(args.repeat, theirs)
    print(f"build  {n} records of {args.value_size} B, {k}/batch")
    print(f"  kafkactl     {n / t_ours / 1e6:8.2f} M records/s")
    print(f"  kafka-python {n / t_theirs / 1e6:8.2f} M records/s")
    print(f"  ratio        {t_theirs / t_ours:8.2f}x")

    batches = ours()
    buf = memoryview(b"".join(batches))

    def read_ours() -> int:
        c = 0
        pos = 0
        while pos < len(buf):
            rb = RecordBatch(buf, pos)
            for _r in rb:
                c += 1
            pos += rb.size
        return c

    def read_theirs() -> int:
        c = 0
        for raw in batches:
            for _r in DefaultRecordBatch(raw):
                c += 1
        return c

    assert read_ours() == read_theirs() == n
    t_ro = best_of(args.repeat, read_ours)
    t_rt = best_of(args.repeat, read_theirs)
    print("read (iterate every record)")
    print(f"  kafkactl     {n / t_ro / 1e6:8.2f} M records/s")
    print(f"  kafka-python {n / t_rt / 1e6:8.2f} M records/s")
    print(f"  ratio        {t_rt / t_ro:8.2f}x")

    reps = max(1, (args.scan_mib << 20) // len(buf))
    big = bytearray(bytes(buf) * reps)
    pos = offset = 0
    while pos < len(big):  # give every copy its own offsets so scan() accepts them all
        rb = RecordBatch(big, pos)
        set_base_offset(big, pos, offset)
        offset += rb.record_count
        pos += rb.size
    view = memoryview(big)
    res = scan(view)
    assert res.error is None, res.error
    t_scan = best_of(args.repeat, lambda: scan(view))
    t_crc = best_of(args.repeat, lambda: crc32c(view))
    print(f"scan {len(big) >> 20} MiB ({res.batch_count} batches of ~{len(buf) // len(batches)} B)")
    print(f"  scan()             {len(big) / t_scan / 1e9:8.2f} GB/s")
    print(f"  crc32c whole buf   {len(big) / t_crc / 1e9:8.2f} GB/s")
    print(f"  ratio scan/crc     {t_crc / t_scan:8.2f}")

if __name__ == "__main__":
    main()
