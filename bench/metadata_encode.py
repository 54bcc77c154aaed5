"""Metadata responses of many partitions: the compiled encoder against the generated one
(issue 33; the many-partitions goal "Metadata all topics max <= 50 ms").

Phases, in one run:
- encode  a body of handlers/metadata.py's shape (`--topics` x `--partitions`, 10,000
          partitions by default) encoded `--rounds` times by each encoder, alternating,
          in this process: best and median per version, the ratio against the generated
          encoder (the pure-Python reference);
- broker  (with `--broker`) two brokers with the same topics, one compiled and one with
          KAFKACTL_NO_EXTENSIONS=1 (every kernel off, but only this encoder is on the
          Metadata path), asked for every topic in turn, `--metadata-rounds` each,
          alternating: round-trip p50/max (response read, not decoded).

    python bench/metadata_encode.py [--topics 100] [--partitions 100] [--rounds 15]
                                    [--broker] [--metadata-rounds 30] [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

from bench_rows import percentile, print_rows, row, write_summary

GOAL = "3 partitions"
VERSIONS = (1, 4, 5, 9, 12)  # kafka-python/aiokafka, librdkafka, kafkajs, Java/confluent


def handler_body(topics: int, partitions: int) -> dict[str, Any]:
    """What handlers/metadata.py answers for every topic (its cached partition dicts)."""
    from kafkactl.protocol.errors import ErrorCode

    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "bench-cluster", "controller_id": 1,
        "topics": [{"error_code": ErrorCode.NONE, "name": f"t{t:03d}",
                    "topic_id": uuid.uuid4(), "is_internal": False,
                    "partitions": [{"error_code": ErrorCode.NONE, "partition_index": p,
                                    "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
                                    "isr_nodes": [1], "offline_replicas": []}
                                   for p in range(partitions)],
                    "topic_authorized_operations": -2147483648} for t in range(topics)],
        "cluster_authorized_operations": -2147483648,
    }


def encode_phase(topics: int, partitions: int, rounds: int) -> list[dict[str, Any]]:
    from kafkactl.protocol import codec
    from kafkactl.protocol.api_keys import ApiKey
    from kafkactl.protocol.kernels import REASON, codec_kernels

    if codec_kernels is None:
        print(f"encode: the compiled kernels are not in use ({REASON}): nothing to compare")
        return []
    body = handler_body(topics, partitions)
    total = topics * partitions
    rows = []
    for version in VERSIONS:
        reference = codec.response_encoder_py(ApiKey.METADATA, version)
        compiled = codec.response_encoder(ApiKey.METADATA, version)
        if compiled(1, body) != reference(1, body):
            raise AssertionError(f"v{version}: the encoders disagree")
        ref_ms: list[float] = []
        twin_ms: list[float] = []
        for i in range(rounds):  # alternating, each first in turn
            order = ((reference, ref_ms), (compiled, twin_ms))
            for encode, out in order if i % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                encode(1, body)
                out.append((time.perf_counter() - t) * 1e3)
        print(f"encode v{version:<2} {total} partitions: generated best "
              f"{min(ref_ms):.2f} ms median {statistics.median(ref_ms):.2f} ms; compiled best "
              f"{min(twin_ms):.3f} ms median {statistics.median(twin_ms):.3f} ms")
        rows.append(row(GOAL, f"Metadata v{version} encode ({total} partitions)",
                        statistics.median(twin_ms), "ms", "report",
                        baseline="generated", baseline_value=statistics.median(ref_ms)))
    return rows


def broker_phase(topics: int, partitions: int, rounds: int) -> list[dict[str, Any]]:
    from broker_common import start_broker
    from many_partitions import create, metadata_all, wait_metadata

    total = topics * partitions
    brokers = {}
    try:
        for name, switch in (("compiled", None), ("pure", "1")):
            if switch is None:
                os.environ.pop("KAFKACTL_NO_EXTENSIONS", None)
            else:
                os.environ["KAFKACTL_NO_EXTENSIONS"] = switch
            try:
                b = start_broker()
            finally:
                os.environ.pop("KAFKACTL_NO_EXTENSIONS", None)
            brokers[name] = b
            wait_metadata(b.port, 60)
            names = [f"t{i:03d}" for i in range(topics)]
            t = time.perf_counter()
            for i in range(0, len(names), 10):
                create(b.port, [(n, partitions) for n in names[i:i + 10]])
            print(f"{name} broker: created {total} partitions in "
                  f"{time.perf_counter() - t:.1f} s")
        times: dict[str, list[float]] = {"compiled": [], "pure": []}
        for name in brokers:  # one warm-up round each (the handler's cache fills)
            metadata_all(brokers[name].port, 1)
        for i in range(rounds):  # alternating, one round at a time
            for name in (("compiled", "pure") if i % 2 == 0 else ("pure", "compiled")):
                got, seen = metadata_all(brokers[name].port, 1)
                if seen != total:
                    raise AssertionError(f"{name}: {seen} partitions, not {total}")
                times[name] += got
        for name, ms in times.items():
            print(f"Metadata all topics, {name} broker: p50 {percentile(ms, .5):.1f} ms, "
                  f"max {max(ms):.1f} ms")
        c, p = times["compiled"], times["pure"]
        return [row(GOAL, f"Metadata all topics p50 ({total} partitions)",
                    percentile(c, .5), "ms", "report", baseline="pure broker",
                    baseline_value=percentile(p, .5)),
                row(GOAL, "Metadata all topics max", max(c), "ms", "<= 50 ms",
                    baseline="pure broker", baseline_value=max(p))]
    finally:
        for b in brokers.values():
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--rounds", type=int, default=15, help="encodings per encoder and version")
    ap.add_argument("--broker", action="store_true", help="also the brokers' round trips")
    ap.add_argument("--metadata-rounds", type=int, default=30)
    ap.add_argument("--summary-json")
    args = ap.parse_args()
    rows = encode_phase(args.topics, args.partitions, args.rounds)
    if args.broker:
        rows += broker_phase(args.topics, args.partitions, args.metadata_rounds)
    print_rows(rows)
    write_summary(args.summary_json, rows)


if __name__ == "__main__":
    main()
