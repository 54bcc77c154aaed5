"""Codec throughput: Produce v9 request decode and Fetch v12 response encode.

Prints requests/s for kafkactl.protocol next to kafka-python's own protocol classes
(an independent, also compiled, implementation) measured in the same run, and the ratio.
Nothing here gates CI.

    python bench/protocol_codec.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import (
    decode_request,
    decode_request_header,
    encode_request,
    encode_response,
)
from kafkactl.protocol.types import FileRegion

PARTITIONS = 4
RECORDS_BYTES = 64 * 1024


def rate(fn: Callable[[], Any], seconds: float, rounds: int = 5) -> float:
    """Best of ``rounds`` short runs (the machine is shared; the best run is the least
    disturbed one)."""
    best = 0.0
    for _ in range(rounds):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds / rounds
        while True:
            for _ in range(100):
                fn()
            n += 100
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n / (now - start))
    return best


def produce_body(records: bytes) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "bench-topic",
                "partition_data": [{"index": p, "records": records} for p in range(PARTITIONS)],
            }
        ],
    }


def fetch_body(records: Any) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "bench-topic",
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": 0,
                        "high_watermark": 1_000_000,
                        "last_stable_offset": 1_000_000,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": records(p),
                    }
                    for p in range(PARTITIONS)
                ],
            }
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    secs = args.seconds
    records = os.urandom(RECORDS_BYTES)

    # ---- Produce v9 decode (broker side): header + body, records stay memoryviews
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce_body(records))[4:]

    def ours_decode() -> None:
        header, off = decode_request_header(frame)
        decode_request(header.api_key, header.api_version, frame, off)

    ours_produce = rate(ours_decode, secs)

    # ---- Fetch v12 encode (broker side): records as FileRegions to be sendfile'd
    with tempfile.TemporaryFile() as tmp:
        tmp.write(records * PARTITIONS)
        tmp.flush()
        fd = tmp.fileno()
        region_body = fetch_body(lambda p: FileRegion(fd, p * RECORDS_BYTES, RECORDS_BYTES))
        small = records[:200]
        small_body = fetch_body(lambda p: small)
        ours_fetch_region = rate(lambda: encode_response(1, 12, 1, region_body), secs)
        ours_fetch_small = rate(lambda: encode_response(1, 12, 1, small_body), secs)

    print(f"Produce v9 decode ({PARTITIONS} partitions x {RECORDS_BYTES // 1024} KiB records)")
    print(f"  kafkactl:     {ours_produce:12,.0f} req/s")
    print(f"Fetch v12 encode ({PARTITIONS} partitions)")
    print(f"  kafkactl FileRegion records: {ours_fetch_region:12,.0f} resp/s")
    print(f"  kafkactl 200-byte records:   {ours_fetch_small:12,.0f} resp/s")

    try:
        from kafka.protocol.consumer.fetch import FetchResponse
        from kafka.protocol.producer.produce import ProduceRequest
    except ImportError:  # pragma: no cover - kafka-python is a test dependency
        print("kafka-python not installed: no baseline")
        return

    def kp_build(cls: Any, d: dict[str, Any]) -> Any:
        kwargs = {}
        for name, field in cls._struct.fields.items():
            if name not in d:
                continue
            v = d[name]
            if v is not None and field.is_struct_array():
                v = [kp_build(field.data_class, x) for x in v]
            kwargs[name] = v
        return cls(**kwargs)

    full = bytes(encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce_body(records)))
    kp_produce = rate(lambda: ProduceRequest[9].decode(full[4:], header=True), secs)
    kp_resp = kp_build(FetchResponse[12], fetch_body(lambda p: small))
    kp_fetch = rate(lambda: kp_resp.encode(version=12), secs)
    print("baseline kafka-python (same run)")
    print(f"  Produce v9 decode:           {kp_produce:12,.0f} req/s   "
          f"ratio kafkactl/kafka-python = {ours_produce / kp_produce:.2f}")
    print(f"  Fetch v12 encode (200 B):    {kp_fetch:12,.0f} resp/s  "
          f"ratio kafkactl/kafka-python = {ours_fetch_small / kp_fetch:.2f}")


if __name__ == "__main__":
    main()
