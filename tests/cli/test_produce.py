"""`kafkactl produce` -> read back exactly by kcat and kafka-python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

KAFKACTL = [sys.executable, "-m", "kafkactl"]


def run(args: list[str], stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(KAFKACTL + args, input=stdin, capture_output=True, timeout=timeout)


def kcat_read(bootstrap: str, topic: str, fmt: str) -> bytes:
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f", fmt],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_lines_read_by_kcat(broker, codec: str) -> None:
    lines = [b"line %d \xff\x00 binary" % i for i in range(300)]
    r = run(["produce", "-b", broker.bootstrap, "-t", "p", "-z", codec, "-p", "0"],
            b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"300 of 300 records acknowledged" in r.stderr
    assert kcat_read(broker.bootstrap, "p", "%s\n").split(b"\n")[:-1] == lines


def test_keys_headers_delimiters_read_by_kafka_python(broker, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition

    src = tmp_path / "in"
    src.write_bytes(b"k1|v1\x00k2|v2\x00nokey\x00|emptykey\x00")
    r = run(["produce", "-b", broker.bootstrap, "-t", "kh", "--file", str(src), "-0",
             "--key-separator", "|", "-H", "a=1", "-H", "nul", "--acks", "1", "-q"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    tp = TopicPartition("kh", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    for m in c:
        got.append((m.key, m.value, m.headers))
        if len(got) == 4:
            break
    c.close()
    hdrs = [("a", b"1"), ("nul", None)]
    assert got == [(b"k1", b"v1", hdrs), (b"k2", b"v2", hdrs), (None, b"nokey", hdrs),
                   (b"", b"emptykey", hdrs)]


def test_sync_and_custom_delimiter(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "s", "--sync", "-D", ";", "-q"],
            b"a;b;c")
    assert r.returncode == 0, r.stderr
    assert kcat_read(broker.bootstrap, "s", "%s\n") == b"a\nb\nc\n"


def test_failure_is_reported_with_count_and_failed_file(tmp_path: Path) -> None:
    failed = tmp_path / "failed"
    r = run(["produce", "-b", "127.0.0.1:1", "-t", "x", "--failed-file", str(failed),
             "-X", "max.block.ms=2000"], b"a\nb\n")
    assert r.returncode != 0
    assert b"Traceback" not in r.stderr
    assert b"no broker answered" in r.stderr or b"not acknowledged" in r.stderr


def test_bad_options_are_clear_errors(broker) -> None:
    for args in (["--acks", "2"], ["-z", "brotli"], ["-X", "nonsense"],
                 ["-X", "no.such.prop=1"], ["--partitioner", "nosuchmod:fn"]):
        r = run(["produce", "-b", broker.bootstrap, "-t", "x", *args], b"a\n")
        assert r.returncode == 2, (args, r.stderr)
        assert b"Traceback" not in r.stderr and b"error:" in r.stderr


def test_missing_partition_reports_unacknowledged(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "onep", "-p", "0", "-q"], b"a\n")
    assert r.returncode == 0
    r = run(["produce", "-b", broker.bootstrap, "-t", "onep", "-p", "7"], b"a\nb\n")
    assert r.returncode == 1
    assert b"partition 7 does not exist" in r.stderr and b"Traceback" not in r.stderr


@pytest.mark.parametrize("partitions", [1, 3])
def test_keyed_lines_land_where_the_java_client_would_put_them(broker, partitions: int) -> None:
    """`-K` without headers takes the bulk keyed path: every key must go to
    murmur2(key) % partitions (kafka-python's implementation of the Java formula), null and
    empty keys stay null/empty, and per-partition order is the input order."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.partitioner.default import murmur2

    topic = f"keyed{partitions}"
    r = run(["topics", "create", "-b", broker.bootstrap, "-t", topic,
             "--partitions", str(partitions)])
    assert r.returncode == 0, r.stderr
    lines = [b"user%d:event %d" % (i % 17, i) for i in range(3000)]
    lines[5] = b"no separator here"
    lines[9] = b":empty key"
    lines[11] = b"big:" + b"v" * 70_000  # past the encoder's tables: the general path
    r = run(["produce", "-b", broker.bootstrap, "-t", topic, "-K", ":", "--batch-size",
             "16384", "-q"], b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000, max_partition_fetch_bytes=1 << 20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    for n, m in enumerate(c, 1):
        got[m.partition].append((m.key, m.value))
        if n == len(lines):
            break
    c.close()
    expected: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    null_key_partitions = set()
    for line in lines:
        k, sep, v = line.partition(b":")
        key, value = (k, v) if sep else (None, line)
        if key is None:
            null_key_partitions.update(p for p, recs in got.items() if (None, line) in recs)
            continue
        expected[(murmur2(key) & 0x7FFFFFFF) % partitions].append((key, value))
    assert len(null_key_partitions) == 1  # the sticky partition
    for p in range(partitions):
        assert [kv for kv in got[p] if kv[0] is not None] == expected[p]
    assert sum(map(len, got.values())) == len(lines)
