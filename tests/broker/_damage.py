"""Helpers for the start-up safety tests: produce with real clients, consume everything with
kcat and kafka-python, find and damage a partition's files on disk."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from kafkactl.record.memory_records import iter_batches
from tests import zygote

KCAT = shutil.which("kcat")


def produce(bootstrap: str, topic: str, values: list[str], *, per_batch: int = 10,
            partition: int = 0) -> None:
    """Send `values` (acks=all) with kafka-python, flushing every `per_batch` records so
    the log gets many small batches; every send must be acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                             retries=5)
    try:
        futures = []
        for i, v in enumerate(values):
            futures.append(producer.send(topic, v.encode(), partition=partition))
            if (i + 1) % per_batch == 0:
                producer.flush()
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def consume_kafka_python(bootstrap: str, topic: str, *, partition: int = 0,
                         max_partition_fetch_bytes: int = 1048576,
                         timeout: float = 60) -> list[tuple[int, str]]:
    """Every record from the beginning to the end offset, as (offset, value); fails if the
    consumer does not reach the end offset within `timeout`."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest",
                             max_partition_fetch_bytes=max_partition_fetch_bytes,
                             fetch_max_bytes=max(max_partition_fetch_bytes, 1024))
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[int, str]] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, (
                f"kafka-python stuck at offset {consumer.position(tp)} of {end}")
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.value.decode()) for r in recs)
        return out
    finally:
        consumer.close()


def consume_kcat(bootstrap: str, topic: str, *extra: str, partition: int = 0,
                 start: int | str = "beginning", timeout: float = 60) -> list[tuple[int, str]]:
    """Every record from `start` with `kcat -C -e`; kcat must exit 0 (librdkafka aborts on
    some malformed logs)."""
    assert KCAT is not None
    proc = subprocess.run(
        [KCAT, "-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", str(start),
         "-e", "-f", "%o|%s\n", *extra], capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (proc.returncode, proc.stderr.decode(errors="replace"))
    out = []
    for line in proc.stdout.decode().splitlines():
        off, _, value = line.partition("|")
        out.append((int(off), value))
    return out


def kafkactl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


def partition_dir(data_dir: Path, topic: str, partition: int = 0) -> Path:
    return data_dir / f"{topic}-{partition}"


def segments(data_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted(partition_dir(data_dir, topic, partition).glob("*.log"))


def batches_of(path: Path) -> list[tuple[int, int, int]]:
    """(base offset, last offset, size) of each batch of a segment file."""
    return [(b.base_offset, b.last_offset, b.size)
            for b in iter_batches(memoryview(path.read_bytes()))]


def truncate_by(path: Path, nbytes: int) -> None:
    os.truncate(path, path.stat().st_size - nbytes)


def assert_clean_sequence(got: list[tuple[int, str]]) -> None:
    offsets = [o for o, _ in got]
    assert offsets == sorted(set(offsets)), "offsets repeat or go backwards"
