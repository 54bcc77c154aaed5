"""Cost of record validation on append (issue 11.3), in-process: for 1 MiB batches of
100-byte records (the shape bench/broker_ingest.py sends), the header + CRC-32C pass the
broker did before, the full validation now (record.framing's column scan, or its walk),
and the rest of the append path (Log.append into a temp dir) for scale. Ratios, not
wall-clock figures, are what to compare between machines.

    PYTHONPATH=. python bench/produce_validation.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.validator import validate_batches
from kafkactl.record.batch import BATCH_HEADER, RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.crc import crc32c

MiB = 1 << 20


def build(kind: str, compression: int = Compression.NONE) -> bytes:
    rng = random.Random(1)
    b = RecordBatchBuilder(compression=compression)
    ts = int(time.time() * 1000)
    i = 0
    while b.size_in_bytes() < MiB - 400:
        if kind == "fixed":  # kafkactl produce / the wire producer: one timestamp
            b.append(ts, None, b"x" * 100)
        elif kind == "librdkafka":  # per-record timestamps, 0..~120 ms into the batch
            b.append(ts + i // 80, None, b"x" * 100)
        else:  # mixed value sizes: the walk
            b.append(ts, None, b"x" * rng.randint(50, 150))
        i += 1
    return b.build()


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return sum(times[:max(1, rounds // 4)]) / max(1, rounds // 4)  # mean of the best quarter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    now = int(time.time() * 1000)
    d = Path(tempfile.mkdtemp(prefix="kafkactl-bench-validate-"))
    try:
        lg = Log(d / "t-0", LogConfig.from_properties({"segment.bytes": str(1 << 30)}))
        cases = [("fixed", Compression.NONE), ("librdkafka", Compression.NONE),
                 ("mixed", Compression.NONE), ("librdkafka", Compression.LZ4)]
        for kind, codec in cases:
            raw = build(kind, codec)
            buf = memoryview(bytearray(raw))
            records = BATCH_HEADER.unpack_from(buf, 0)[-1]

            def before(buf: memoryview = buf) -> None:
                BATCH_HEADER.unpack_from(buf, 0)
                crc32c(buf[21:])

            def now_(buf: memoryview = buf) -> None:
                validate_batches(buf, max_message_bytes=1 << 30, timestamp_type="CreateTime",
                                 max_timestamp_difference_ms=2**63 - 1, now_ms=now,
                                 produce_version=9, single_batch=True)

            def append(raw: bytes = raw) -> None:
                lg.append(memoryview(bytearray(raw)))

            t_before, t_now = best(before, args.rounds), best(now_, args.rounds)
            t_append = best(append, max(10, args.rounds // 4))
            name = f"{kind}/{Compression(codec).java_name}"
            print(f"{name:18} {records:6,} records: header+CRC {t_before * 1e3:6.3f} ms, "
                  f"validation now {t_now * 1e3:6.3f} ms (+{(t_now - t_before) * 1e3:.3f} ms); "
                  f"Log.append {t_append * 1e3:6.3f} ms -> the check adds "
                  f"{(t_now - t_before) / (t_before + t_append) * 100:5.1f}% to "
                  f"validate+append")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
