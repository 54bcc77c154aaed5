"""`kafkactl dump-log --offsets-decoder`: `__consumer_offsets` records as Kafka's
DumpLogSegments --offsets-decoder prints them (issue 30 item 9): the group metadata and
offset commits a real librdkafka consumer group leaves, decoded, instead of raw bytes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from kafkactl.record.batch import RecordBatchBuilder
from tests import zygote
from tests.polling import wait_until

SEG = "00000000000000000000"


def kafkactl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), input=stdin, text=True, timeout=120)


def _key_and_payload(line: str) -> tuple[Any, str | None]:
    """The decoded key (JSON) and the payload text of one record line."""
    rest = line.split(" key: ", 1)[1]
    key, _, payload = rest.partition(" payload: ")
    return json.loads(key), payload or None


def _consume_as_group(bootstrap: str, group: str, topic: str, count: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got: list[Any] = []

        def polled() -> bool:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m)
            return len(got) >= count

        wait_until(polled, 60, f"{count} records for group {group}")
        c.commit(asynchronous=False)
    finally:
        c.close()


def test_offsets_decoder_on_a_real_groups_records(broker: Any) -> None:
    r = kafkactl("produce", "-b", broker.bootstrap, "-t", "orders", "-q", stdin="a\nb\nc\n")
    assert r.returncode == 0, r.stderr
    _consume_as_group(broker.bootstrap, "billing", "orders", 3)
    r = kafkactl("offsets", "delete", "-b", broker.bootstrap, "-G", "billing", "--topic",
                 "orders", "--execute")
    assert r.returncode == 0, r.stderr
    assert broker.stop() == 0, broker.log()
    (segment,) = [p for p in broker.data_dir.glob(f"__consumer_offsets-*/{SEG}.log")
                  if p.stat().st_size]

    r = kafkactl("dump-log", str(segment), "--offsets-decoder")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    records = [ln for ln in r.stdout.splitlines() if ln.startswith("| offset: ")]
    decoded = [_key_and_payload(ln) for ln in records]
    group_key = {"type": "2", "data": {"group": "billing"}}
    offset_key = {"type": "1", "data": {"group": "billing", "topic": "orders", "partition": 0}}
    # the group as the join left it: a consumer-protocol group, its member's subscription
    # and assignment decoded
    joined = [json.loads(p) for k, p in decoded if k == group_key and p != "<DELETE>"]
    first = joined[0]
    assert first["version"] == "3"
    data = first["data"]
    assert (data["protocolType"], data["generation"], data["protocol"]) == \
        ("consumer", 1, "range")
    (member,) = data["members"]
    assert member["memberId"] == data["leader"] and member["clientId"] == "rdkafka"
    assert member["subscription"]["topics"] == ["orders"]
    assert member["assignment"]["assignedPartitions"] == [{"topic": "orders",
                                                           "partitions": [0]}]
    assert list(data) == ["protocolType", "generation", "protocol", "leader",
                          "currentStateTimestamp", "members"]
    # the commit, then its deletion (a tombstone)
    commits = [p for k, p in decoded if k == offset_key]
    commit = json.loads(commits[0])
    assert commit["version"] == "3" and commit["data"]["offset"] == 3
    assert list(commit["data"]) == ["offset", "leaderEpoch", "metadata", "commitTimestamp"]
    assert commits[-1] == "<DELETE>"
    # the JSON is compact, as Kafka's (Jackson) prints it
    assert ' key: {"type":"1","data":{"group":"billing","topic":"orders","partition":0}} ' \
           'payload: {"version":"3","data":{"offset":3,"leaderEpoch":' in r.stdout

    # --json: the same, as JSON values
    r = kafkactl("dump-log", str(segment), "--offsets-decoder", "--json")
    objs = [json.loads(ln) for ln in r.stdout.splitlines()]
    recs = [o for o in objs if o["type"] == "record"]
    assert [o["key"] for o in recs] == [k for k, _p in decoded]
    assert recs[-1]["payload"] == "<DELETE>"
    # without the decoder the records stay raw bytes
    raw = kafkactl("dump-log", str(segment), "--print-data-log").stdout
    assert '"type":"2"' not in raw and "payload: " in raw


def test_records_that_do_not_decode_are_sentences(tmp_path: Path) -> None:
    b = RecordBatchBuilder()
    b.append(int(time.time() * 1000), None, b"no key")
    b.append(int(time.time() * 1000), b"\x00\x07garbage", b"x")
    b.append(int(time.time() * 1000), b"\x00\x01\x00", b"\x00\x03")
    (tmp_path / f"{SEG}.log").write_bytes(b.build())
    r = kafkactl("dump-log", str(tmp_path / f"{SEG}.log"), "--offsets-decoder")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("| offset: ")]
    assert lines[0].endswith(" key: Failed to decode message at offset 0 using offset topic "
                             "decoder (message had a missing key)")
    assert lines[1].endswith(" key: Unknown record type 7 at offset 1, skipping.")
    assert " key: Error at offset 2, skipping. " in lines[2] and "payload" not in lines[2]
