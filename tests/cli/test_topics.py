"""`kafkactl topics` through the protocol."""

from __future__ import annotations

import json
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


def _produce_at(bootstrap: str, topic: str, stamped: list[tuple[int, int]]) -> None:
    """(partition, CreateTime) records through librdkafka, each with its own timestamp."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, ts in stamped:
        p.produce(topic, value=f"at {ts}".encode(), partition=partition, timestamp=ts)
        p.flush(30)
    assert p.flush(30) == 0


def _kcat_offset(bootstrap: str, topic: str, partition: int, ts: int) -> int:
    """`kcat -Q -t T:P:TS` answers `T [P] offset N`."""
    r = subprocess.run(["kcat", "-b", bootstrap, "-Q", "-t", f"{topic}:{partition}:{ts}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split("offset")[1].split()[0])


def test_topics_offsets_like_kafka_get_offsets(broker) -> None:
    """Start/end offsets and offsets by time (kcat -Q, kafka-get-offsets): issue 30 item 9."""
    from datetime import UTC, datetime

    b = ["-b", broker.bootstrap]
    assert run("create", "-t", "clicks", "--partitions", "2", *b).returncode == 0
    base = 1_700_000_000_000
    _produce_at(broker.bootstrap, "clicks", [(0, base + i * 1000) for i in range(5)])
    r = run("offsets", "-t", "clicks", *b)  # latest, as kafka-get-offsets by default
    assert r.returncode == 0 and r.stdout.splitlines() == ["clicks:0:5", "clicks:1:0"], r.stderr
    r = run("offsets", "-t", "clicks", "--time", "earliest", "-p", "0", *b)
    assert r.stdout.splitlines() == ["clicks:0:0"]
    assert run("offsets", "-t", "clicks", "--time", "-2", *b).stdout.splitlines() == \
        ["clicks:0:0", "clicks:1:0"]
    # by timestamp: the first offset whose record is at least that new, as kcat -Q says
    for ts in (base - 1, base + 2500, base + 4000):
        ours = run("offsets", "-t", "clicks", "-p", "0", "--time", str(ts), *b).stdout
        assert ours == f"clicks:0:{_kcat_offset(broker.bootstrap, 'clicks', 0, ts)}\n"
    assert run("offsets", "-t", "clicks", "-p", "0", "--time", str(base + 2500),
               *b).stdout == "clicks:0:3\n"
    # newer than every record: no offset (kafka-get-offsets prints it empty)
    assert run("offsets", "-t", "clicks", "--time", str(base + 10**6), *b).stdout \
        .splitlines() == ["clicks:0:", "clicks:1:"]
    iso = datetime.fromtimestamp((base + 1000) / 1000, UTC).isoformat()
    assert run("offsets", "-t", "clicks", "-p", "0", "--time", iso, *b).stdout == \
        "clicks:0:1\n"
    assert run("offsets", "-t", "clicks", "-p", "0", "--time", "max-timestamp", *b).stdout \
        == "clicks:0:4\n"
    r = run("offsets", "-t", "clicks", "--time", str(base + 1500), "--json", *b)
    assert json.loads(r.stdout) == [
        {"topic": "clicks", "partition": 0, "offset": 2, "timestamp": base + 2000},
        {"topic": "clicks", "partition": 1, "offset": None, "timestamp": None}]
    # every topic when none is named
    assert "clicks:1:0" in run("offsets", "--exclude-internal", *b).stdout.splitlines()
    # clear errors
    r = run("offsets", "-t", "nosuch", *b)
    assert r.returncode == 1 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = run("offsets", "-t", "clicks", "-p", "9", *b)
    assert r.returncode == 1 and "has no partition 9" in r.stderr
    r = run("offsets", "-t", "clicks", "--time", "yesterday", *b)
    assert r.returncode == 2 and "bad --time 'yesterday'" in r.stderr
