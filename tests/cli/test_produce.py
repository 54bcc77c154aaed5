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
