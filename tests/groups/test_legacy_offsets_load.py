"""__consumer_offsets written in Kafka's pre-0.11 formats (magic 0/1 messages, as Kafka 0.8-0.10
wrote them) is loaded as Kafka's GroupMetadataManager loads it: offset commits (key v0/v1,
value v0/v1) and group metadata, plain and in compressed wrappers, tombstones too, in offset
order with the record batches written after them. Before, every magic 0/1 batch was skipped:
the group's offsets were silently lost and consumers started over."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafkactl.broker.coordinator.group import OffsetAndMetadata
from kafkactl.broker.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    offset_key,
    offset_value,
    partition_for,
)
from kafkactl.broker.coordinator.transaction_state_manager import _read_partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.protocol.data import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    encode_data,
)
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.legacy import build_message_set
from tests.broker.wire import Wire
from tests.groups.helpers import kafkactl, offsets_show

GROUP = "legacyg"  # in __consumer_offsets-24 of 50
TOPIC = "bg"


def _key(version: int, partition: int) -> bytes:
    return encode_data(OFFSET_COMMIT_KEY, version, {"group": GROUP, "topic": TOPIC,
                                                    "partition": partition})


def _value(version: int, offset: int, now_ms: int) -> bytes:
    fields: dict[str, Any] = {"offset": offset, "metadata": f"m{offset}",
                              "commit_timestamp": now_ms}
    if version == 1:
        fields["expire_timestamp"] = now_ms + 7 * 86_400_000
    return encode_data(OFFSET_COMMIT_VALUE, version, fields)


def legacy_offsets_segment(now_ms: int) -> tuple[bytes, int]:
    """Kafka 0.9/0.10 offset commits of GROUP: (the message set, the next offset).
    What is left: bg-0 123, bg-1 11, bg-2 22, bg-3 33, bg-5 55 (bg-4's tombstone)."""
    parts = [
        # 0: magic 0, key v0, value v0: bg-0 at 100 (superseded at offset 4)
        build_message_set(0, [(None, _key(0, 0), _value(0, 100, now_ms))], base_offset=0),
        # 1-2: magic 0 gzip wrapper (absolute inner offsets)
        build_message_set(0, [(None, _key(0, 1), _value(0, 11, now_ms)),
                              (None, _key(0, 2), _value(1, 22, now_ms))],
                          Compression.GZIP, base_offset=1),
        # 3: magic 1, key v1, value v1
        build_message_set(1, [(now_ms, _key(1, 3), _value(1, 33, now_ms))], base_offset=3),
        # 4-6: magic 1 gzip wrapper (relative inner offsets): bg-0 moves to 123
        build_message_set(1, [(now_ms, _key(1, 0), _value(1, 123, now_ms)),
                              (now_ms, _key(1, 4), _value(1, 44, now_ms)),
                              (now_ms, _key(1, 5), _value(1, 55, now_ms))],
                          Compression.GZIP, base_offset=4),
        # 7: magic 1 tombstone for bg-4
        build_message_set(1, [(now_ms, _key(1, 4), None)], base_offset=7),
        # 8: magic 1 group metadata (key v2, value v0): an Empty group of generation 3
        build_message_set(1, [(now_ms, encode_data(GROUP_METADATA_KEY, 2, {"group": GROUP}),
                               encode_data(GROUP_METADATA_VALUE, 0, {
                                   "protocol_type": "consumer", "generation": 3,
                                   "protocol": "range", "leader": None, "members": []}))],
                          base_offset=8),
    ]
    return b"".join(parts), 9


EXPECTED = {(TOPIC, 0): 123, (TOPIC, 1): 11, (TOPIC, 2): 22, (TOPIC, 3): 33, (TOPIC, 5): 55}


def _manager() -> GroupMetadataManager:
    manager = GroupMetadataManager.__new__(GroupMetadataManager)
    manager.groups = {}
    manager.num_partitions = 50
    manager.on_group_loaded = None
    return manager


def test_legacy_offset_commits_replayed_in_order_with_v2(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    data, end = legacy_offsets_segment(now)
    d = tmp_path / "__consumer_offsets-24"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(data)
    log = Log(d, LogConfig.from_properties({"cleanup.policy": "compact"}))
    assert log.log_end_offset == end
    # a v2 commit after the legacy ones: it wins for bg-1, and bg-5's v2 tombstone
    b = RecordBatchBuilder()
    b.append(now, offset_key(GROUP, TOPIC, 1), offset_value(OffsetAndMetadata(12, -1, "", now)))
    b.append(now, offset_key(GROUP, TOPIC, 5), None)
    log.append(b.build())
    manager = _manager()
    entries, read_end = GroupMetadataManager._read_batches(log, None)
    assert read_end == end + 2
    assert len(entries) == 9 + 2
    manager._apply(entries)
    group = manager.groups[GROUP]
    assert {tp: o.offset for tp, o in group.offsets.items()} == \
        {**{tp: o for tp, o in EXPECTED.items() if tp != (TOPIC, 5)}, (TOPIC, 1): 12}
    assert group.offsets[(TOPIC, 0)].metadata == "m123"
    assert group.offsets[(TOPIC, 3)].expire_timestamp == now + 7 * 86_400_000
    assert group.generation_id == 3 and group.protocol_type == "consumer"
    # the tail read (what was appended during a load) starts past the legacy messages
    tail, tail_end = GroupMetadataManager._read_batches(log, end)
    assert [e.kind for e in tail] == ["offset", "offset"] and tail_end == end + 2
    log.close()


def test_legacy_messages_in_transaction_state_do_not_stop_its_load(tmp_path: Path) -> None:
    """Kafka never wrote __transaction_state in magic 0/1 (it came with 0.11); such messages
    are read as Kafka's loader reads every record: garbage logged and skipped, a keyless one
    ignored, a well-formed tombstone loaded; no crash."""
    d = tmp_path / "__transaction_state-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(
        build_message_set(1, [(1, b"\x00\x09garbage", b"x"), (2, None, b"y")],
                          Compression.GZIP)
        + build_message_set(0, [(None, b"\x00\x00\x00\x01t", None)], base_offset=2))
    log = Log(d, LogConfig.from_properties({"cleanup.policy": "compact"}))
    assert [(t.transactional_id, t.value) for t in _read_partition(log)] == [("t", None)]
    log.close()


def _committed(bootstrap: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(6)], timeout=30)
        return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def test_broker_loads_legacy_offsets_and_consumers_resume(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer

    assert partition_for(GROUP, 50) == 24
    b = broker_factory(group_initial_rebalance_delay_ms="0")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, 6)["error_code"] == 0
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(200):
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    # another group creates __consumer_offsets (partition 26, not 24)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "other"})
    from confluent_kafka import TopicPartition

    c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    c.close()
    b.stop()
    part = b.data_dir / "__consumer_offsets-24"
    for f in part.iterdir():
        if f.is_file():
            f.unlink()
    data, _end = legacy_offsets_segment(int(time.time() * 1000))
    (part / "00000000000000000000.log").write_bytes(data)
    b.start()
    assert _committed(b.bootstrap) == EXPECTED
    assert "loaded __consumer_offsets-24: 9 record(s), 1 group(s)" in b.log()
    rows = offsets_show(b.bootstrap, GROUP)
    assert {tp: r["current_offset"] for tp, r in rows.items()
            if r["current_offset"] is not None} == EXPECTED
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error():
                msg = None
        assert msg is not None and msg.offset() == 123 and msg.value() == b"v123"
    finally:
        c.close()
    r = kafkactl("offsets", "show", "-G", GROUP, "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "does not exist" not in r.stdout + r.stderr
