"""`kafkactl delete-records` (kafka-delete-records.sh) against a real broker: Kafka's offset
JSON file and the -t/-p/--before shortcuts, -1 / end for the high watermark, several
partitions in one run, a partition that fails (an offset above the high watermark, a
missing topic) while the others are done, --json, Kafka's refusals of a bad file, and
consumers (kcat, librdkafka) that then start at the new low watermark."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until

HEADER = ["Executing records delete operation", "Records delete operation completed:"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["delete-records", *args], text=True, timeout=120)


def create(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """`topic` with `records` records (v0 .. v<records-1>) in each partition."""
    from confluent_kafka import Producer

    r = zygote.run(["topics", "create", "-b", bootstrap, "-t", topic, "--partitions",
                    str(partitions)], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(records):
            producer.produce(topic, f"v{i}".encode(), partition=p)
    assert producer.flush(60) == 0


def offset_file(tmp_path: Path, rows: list[tuple[str, int, int]], **extra: Any) -> Path:
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps({"partitions": [
        {"topic": t, "partition": p, "offset": o} for t, p, o in rows], "version": 1,
        **extra}))
    return path


def earliest(bootstrap: str, topic: str) -> list[str]:
    r = zygote.run(["topics", "offsets", "-b", bootstrap, "-t", topic, "--time", "earliest"],
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def kcat_offsets(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(partition, offset) of every record kcat reads from the beginning."""
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
                        "-q", "-X", "fetch.wait.max.ms=10", "-f", "%p %o\n"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return sorted((int(p), int(o)) for p, o in (line.split() for line in r.stdout.splitlines()))


def test_offset_json_file_several_partitions_high_watermark_and_out_of_range(
        module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    create(b, "purge-file", 3, 10)
    path = offset_file(tmp_path, [("purge-file", 0, 4), ("purge-file", 1, -1),
                                  ("purge-file", 2, 11)])
    r = run("--offset-json-file", str(path), "-b", b)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[:4] == [*HEADER, "partition: purge-file-0\tlow_watermark: 4",
                         "partition: purge-file-1\tlow_watermark: 10"], r.stdout
    assert lines[4].startswith("partition: purge-file-2\terror: OFFSET_OUT_OF_RANGE: offset "
                               "11 is above the partition's high watermark"), r.stdout
    assert len(lines) == 5
    assert r.stderr == "error: the records of 1 of 3 partition(s) were not deleted\n"
    # the others were done all the same; the one that failed kept its records
    assert earliest(b, "purge-file") == ["purge-file:0:4", "purge-file:1:10",
                                         "purge-file:2:0"]
    assert kcat_offsets(b, "purge-file") == [(0, o) for o in range(4, 10)] + \
        [(2, o) for o in range(10)]

    # deleting below the log start again changes nothing, and is no error
    path = offset_file(tmp_path, [("purge-file", 0, 2)])
    r = run("--offset-json-file", str(path), "-b", b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [*HEADER, "partition: purge-file-0\tlow_watermark: 4"]


def test_shortcuts_every_partition_or_some_and_end(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    create(b, "purge-short", 3, 6)
    r = run("-t", "purge-short", "--before", "2", "-b", b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [*HEADER] + [
        f"partition: purge-short-{p}\tlow_watermark: 2" for p in range(3)]
    r = run("-t", "purge-short", "-p", "0,2", "--before", "end", "-b", b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [*HEADER, "partition: purge-short-0\tlow_watermark: 6",
                                     "partition: purge-short-2\tlow_watermark: 6"]
    r = run("-t", "purge-short", "-p", "1", "--before", "-1", "-b", b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[2:] == ["partition: purge-short-1\tlow_watermark: 6"]
    assert earliest(b, "purge-short") == [f"purge-short:{p}:6" for p in range(3)]
    assert kcat_offsets(b, "purge-short") == []


def test_json_output(module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    create(b, "purge-json", 2, 5)
    path = offset_file(tmp_path, [("purge-json", 1, 3), ("purge-json", 0, 9)])
    r = run("--offset-json-file", str(path), "--json", "-b", b)
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)
    assert rows[1] == {"topic": "purge-json", "partition": 1, "offset": 3,
                       "low_watermark": 3, "error": None, "message": None}
    assert rows[0]["error"] == "OFFSET_OUT_OF_RANGE" and rows[0]["low_watermark"] is None
    assert rows[0]["message"].startswith("OFFSET_OUT_OF_RANGE: offset 9 is above")
    assert [(row["topic"], row["partition"]) for row in rows] == [("purge-json", 0),
                                                                  ("purge-json", 1)]
    r = run("-t", "purge-json", "--before", "end", "--json", "-b", b)
    assert r.returncode == 0, r.stderr
    assert [(row["partition"], row["offset"], row["low_watermark"])
            for row in json.loads(r.stdout)] == [(0, -1, 5), (1, -1, 5)]


def test_missing_topic(module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    r = run("-t", "purge-nowhere", "--before", "end", "-b", b)
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert r.stderr == "error: topic 'purge-nowhere' does not exist (create it with " \
                       "`kafkactl topics create`)\n"
    # in a file: that partition fails, the others are done
    create(b, "purge-there", 1, 3)
    path = offset_file(tmp_path, [("purge-nowhere", 0, 1), ("purge-there", 0, 1),
                                  ("purge-there", 5, 1)])
    r = run("--offset-json-file", str(path), "-b", b)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        *HEADER,
        "partition: purge-nowhere-0\terror: UNKNOWN_TOPIC_OR_PARTITION: topic "
        "'purge-nowhere' does not exist",
        "partition: purge-there-0\tlow_watermark: 1",
        "partition: purge-there-5\terror: UNKNOWN_TOPIC_OR_PARTITION: topic 'purge-there' "
        "has no partition 5 (it has 1)"]
    assert "2 of 3" in r.stderr
    r = zygote.run(["topics", "list", "-b", b], text=True, timeout=60)
    assert "purge-nowhere" not in r.stdout.split()  # not auto-created


def test_consumers_start_at_the_new_low_watermark(module_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    b = module_broker.bootstrap
    create(b, "purge-read", 1, 20)
    r = run("-t", "purge-read", "--before", "15", "-b", b)
    assert r.returncode == 0, r.stderr
    assert kcat_offsets(b, "purge-read") == [(0, o) for o in range(15, 20)]
    consumer = Consumer({"bootstrap.servers": b, "group.id": "purge-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["purge-read"])
        got: list[Any] = []

        def five() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
            return len(got) >= 5

        wait_until(five, 60, "5 records")
        assert [(m.offset(), m.value()) for m in got] == [(o, f"v{o}".encode())
                                                         for o in range(15, 20)]
    finally:
        consumer.close()


def test_bad_offset_files_are_refused_as_kafka_does(module_broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    b = module_broker.bootstrap
    create(b, "purge-dup", 2, 4)
    path = offset_file(tmp_path, [("purge-dup", 0, 1), ("purge-dup", 1, 1),
                                  ("purge-dup", 0, 2)])
    r = run("--offset-json-file", str(path), "-b", b)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"error: {path}: Offset json file contains duplicate topic "
                        "partitions: purge-dup-0\n")
    assert earliest(b, "purge-dup") == ["purge-dup:0:0", "purge-dup:1:0"]  # nothing done
    cases = [("{", "The input string is not a valid JSON"),
             ('{"version": 2, "partitions": []}', "Not supported version field value 2"),
             ('{"version": 1}', "Missing partitions field"),
             ('{"partitions": [{"topic": "t", "offset": 1}]}',
              "partitions[0]: No such field exists: `partition`"),
             ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}',
              "partitions[0]: offset -2 of t-0 is not an offset")]
    for text, reason in cases:
        path.write_text(text)
        r = run("--offset-json-file", str(path), "-b", b)
        assert r.returncode == 1 and r.stderr.startswith(f"error: {path}: {reason}"), \
            (text, r.stderr)
    # no version: version 1, as Kafka; no partitions: nothing to do
    path.write_text('{"partitions": []}')
    r = run("--offset-json-file", str(path), "-b", b)
    assert r.returncode == 0 and r.stdout.splitlines() == HEADER, r.stderr


def test_usage_errors() -> None:
    b = ["-b", "127.0.0.1:1"]  # nothing is sent: refused before
    for args, said in [
            ([], "give either --offset-json-file FILE or --topic TOPIC with --before"),
            (["-t", "x"], "--topic needs --before OFFSET (or --before end)"),
            (["-t", "x", "--before", "soon"], "bad --before 'soon'"),
            (["-t", "x", "--before", "-2"], "bad --before '-2'"),
            (["-t", "x", "-p", "a", "--before", "1"], "bad --partition 'a'")]:
        r = run(*args, *b)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {said}"), (args, r.stderr)


def test_delete_refused_by_an_acl(broker_factory: Any) -> None:
    """The principal may describe the topic but not Delete it: TOPIC_AUTHORIZATION_FAILED,
    said with what to grant."""
    broker = broker_factory(**{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    b = broker.bootstrap
    create(b, "guarded", 2, 3)
    for args in (["--allow-principal", "User:ANONYMOUS", "--operation", "All"],
                 ["--deny-principal", "User:ANONYMOUS", "--operation", "Delete"]):
        r = zygote.run(["acls", "add", *args, "--topic", "guarded", "-b", b], text=True,
                       timeout=60)
        assert r.returncode == 0, r.stderr
    r = run("-t", "guarded", "--before", "end", "-b", b)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == [*HEADER] + [
        f"partition: guarded-{p}\terror: TOPIC_AUTHORIZATION_FAILED: not authorized: deleting "
        "records needs the Delete operation on topic 'guarded' (kafkactl acls add "
        "--allow-principal ... --operation Delete --topic guarded)" for p in range(2)]
    assert earliest(b, "guarded") == ["guarded:0:0", "guarded:1:0"]
    # nor Describe: its partitions cannot be found (-p: not sent, each one said so)
    r = zygote.run(["acls", "add", "--deny-principal", "User:ANONYMOUS", "--operation",
                    "Describe", "--topic", "guarded", "-b", b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run("-t", "guarded", "--before", "end", "-b", b)
    assert (r.returncode, r.stdout) == (1, ""), r.stdout
    assert r.stderr == ("error: topic 'guarded': TOPIC_AUTHORIZATION_FAILED: this principal "
                        "may not describe the topic\n")
    r = run("-t", "guarded", "-p", "1", "--before", "end", "-b", b)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[2:] == [
        "partition: guarded-1\terror: TOPIC_AUTHORIZATION_FAILED: this principal may not "
        "describe topic 'guarded'"]


def test_a_compacted_topic_refuses(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    r = zygote.run(["topics", "create", "-b", b, "-t", "purge-compacted", "--config",
                    "cleanup.policy=compact"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run("-t", "purge-compacted", "--before", "end", "-b", b)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[2:] == [
        "partition: purge-compacted-0\terror: POLICY_VIOLATION: the topic's cleanup.policy "
        "is compact only: records of a compacted topic cannot be deleted"]


def test_no_broker_is_one_clear_error() -> None:
    for args in (["-t", "x", "--before", "1"], ["-t", "x", "-p", "0", "--before", "1"]):
        r = run(*args, "-b", "127.0.0.1:1", "--timeout", "5")
        assert (r.returncode, r.stdout) == (1, ""), r.stdout
        assert r.stderr.startswith("error: no broker answered at 127.0.0.1:1"), r.stderr
        assert "Traceback" not in r.stderr
