"""`kafkactl topics` through the protocol."""

from __future__ import annotations

import subprocess

from tests import zygote


def run(*args: str) -> subprocess.CompletedProcess:
    return zygote.run(["topics", *args], timeout=60, text=True)


def test_topics_lifecycle(broker) -> None:
    b = ["-b", broker.bootstrap]
    r = run("create", "-t", "orders", "--partitions", "3", "--config", "retention.ms=60000", *b)
    assert r.returncode == 0 and "Created topic orders." in r.stdout, r.stderr
    r = run("create", "-t", "orders", *b)
    assert r.returncode == 1 and "TOPIC_ALREADY_EXISTS" in r.stderr
    assert run("create", "-t", "orders", "--if-not-exists", *b).returncode == 0
    assert "orders" in run("list", *b).stdout.split()
    d = run("describe", "-t", "orders", *b).stdout
    assert "PartitionCount: 3" in d and "retention.ms=60000" in d
    assert d.count("\tPartition: ") == 3
    r = run("alter", "-t", "orders", "--partitions", "5", "--config", "segment.bytes=2000000",
            *b)
    assert r.returncode == 0, r.stderr
    d = run("describe", "-t", "orders", *b).stdout
    assert "PartitionCount: 5" in d and "segment.bytes=2000000" in d
    r = run("alter", "-t", "orders", "--delete-config", "segment.bytes", *b)
    assert r.returncode == 0 and "segment.bytes" not in run("describe", "-t", "orders", *b).stdout
    assert run("delete", "-t", "orders", *b).returncode == 0
    assert "orders" not in run("list", *b).stdout.split()
    r = run("delete", "-t", "orders", *b)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert run("delete", "-t", "orders", "--if-exists", *b).returncode == 0
    r = run("describe", "-t", "orders", *b)
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_no_broker_is_a_clear_error() -> None:
    r = run("list", "-b", "127.0.0.1:1")
    assert r.returncode == 1 and "no broker answered" in r.stderr and "Traceback" not in r.stderr
