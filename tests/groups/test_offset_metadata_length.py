"""offset.metadata.max.bytes counts the commit metadata as Kafka does: Java's
String.length(), UTF-16 code units (GroupMetadataManager.validateOffsetMetadataLength,
`metadata.length() <= maxMetadataSize`), not UTF-8 bytes. 4096 'é' (8192 UTF-8 bytes) fit
the default 4096, 4097 do not; an emoji (past U+FFFF) counts 2, so 2048 fit and one more
unit does not. The same rule for OffsetCommit (raw v2 and v8, and confluent-kafka's commit)
and TxnOffsetCommit (its offsets are refused before the transaction, never committed)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.broker.wire import Wire
from tests.polling import wait_until

LIMIT = 4096  # offset.metadata.max.bytes, Kafka's default
EMOJI = "\U0001f600"  # 4 UTF-8 bytes, 2 UTF-16 units


def _edges(units: int) -> list[tuple[str, bool]]:
    """Metadata of exactly `units` UTF-16 units and of one more: BMP non-ASCII (é, €) and
    astral (emoji, 2 units each)."""
    astral = EMOJI * (units // 2) + "a" * (units % 2)
    return [("\u00e9" * units, True), ("\u00e9" * (units + 1), False),
            ("\u20ac" * units, True), ("\u20ac" * (units + 1), False),
            (astral, True), (astral + "a", False),
            (EMOJI * (units // 2 + 1), False)]


# (metadata, accepted): at the limit in UTF-16 units and one unit above it
CASES = [("a" * LIMIT, True), ("a" * (LIMIT + 1), False), *_edges(LIMIT),
         ("a" + EMOJI * (LIMIT // 2 - 1) + "\u00e9", True)]  # 1 + 4094 + 1 units


def _topic(w: Wire) -> str:
    name = f"oml-{uuid.uuid4().hex[:8]}"
    assert w.create_topic(name, len(CASES) + 1)["error_code"] == 0
    return name


def _coordinator(w: Wire, key: str, key_type: int) -> None:
    wait_until(lambda: w.request(ApiKey.FIND_COORDINATOR, 3, {
        "key": key, "key_type": key_type})["error_code"] == 0, 60, f"the coordinator of {key}")


def _fetch(w: Wire, group: str, topic: str) -> dict[int, tuple[int, str | None]]:
    r = w.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": True,
        "topics": [{"name": topic, "partition_indexes": list(range(len(CASES)))}]})
    assert r["error_code"] == 0, r
    return {p["partition_index"]: (p["committed_offset"], p["metadata"])
            for p in r["topics"][0]["partitions"]}


def _expected_codes() -> dict[int, int]:
    return {i: E.NONE if ok else E.OFFSET_METADATA_TOO_LARGE
            for i, (_m, ok) in enumerate(CASES)}


def _check_stored(w: Wire, group: str, topic: str) -> None:
    got = _fetch(w, group, topic)
    for i, (meta, ok) in enumerate(CASES):
        assert got[i] == ((100 + i, meta) if ok else (-1, "")), (i, len(meta), got[i][0])


@pytest.mark.parametrize("version", [2, 8])
def test_offset_commit_counts_utf16_units(module_broker: Any, version: int) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic = _topic(w)
        _coordinator(w, group, 0)
        r = w.request(ApiKey.OFFSET_COMMIT, version, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": i, "committed_offset": 100 + i,
                 "committed_leader_epoch": -1, "commit_timestamp": -1,
                 "committed_metadata": meta} for i, (meta, _ok) in enumerate(CASES)]}]})
        codes = {p["partition_index"]: p["error_code"] for p in r["topics"][0]["partitions"]}
        assert codes == _expected_codes()
        _check_stored(w, group, topic)


def test_txn_offset_commit_counts_utf16_units(module_broker: Any) -> None:
    group, tid = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic = _topic(w)
        _coordinator(w, tid, 1)
        init = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})
        assert init["error_code"] == 0, init
        pid, epoch = init["producer_id"], init["producer_epoch"]
        assert w.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "group_id": group})["error_code"] == 0
        _coordinator(w, group, 0)
        r = w.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": tid, "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": i, "committed_offset": 100 + i,
                 "committed_leader_epoch": -1, "committed_metadata": meta}
                for i, (meta, _ok) in enumerate(CASES)]}]})
        codes = {p["partition_index"]: p["error_code"] for p in r["topics"][0]["partitions"]}
        assert codes == _expected_codes()
        assert w.request(ApiKey.END_TXN, 3, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "committed": True})["error_code"] == 0
        wait_until(lambda: _stable(w, group, topic), 30, "the commit's marker")
        _check_stored(w, group, topic)


def _stable(w: Wire, group: str, topic: str) -> bool:
    r = w.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": True,
        "topics": [{"name": topic, "partition_indexes": list(range(len(CASES)))}]})
    return r["error_code"] == 0 and all(p["error_code"] == 0
                                        for p in r["topics"][0]["partitions"])


def test_confluent_kafka_commit_with_metadata(module_broker: Any) -> None:
    """A real client's commit (librdkafka's OffsetCommit) with metadata at the edges: the
    accepted ones read back from committed(), the refused ones fail the commit with
    OFFSET_METADATA_TOO_LARGE and leave nothing committed. confluent-kafka sends the
    metadata with its C string's NUL (a raw OffsetFetch reads 'x\\0' back for 'x'): that
    NUL counts too, as it would in Kafka, so the edges are found with a probe first."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    group = f"g-{uuid.uuid4().hex[:8]}"
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic = _topic(w)
        c = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(topic, 0, 1, metadata="x")], asynchronous=False)
            sent = _fetch(w, group, topic)[0][1]
            assert sent in ("x", "x\0"), repr(sent)
            cases = _edges(LIMIT - (len(sent) - 1))
            for i, (meta, ok) in enumerate(cases, start=1):
                tp = TopicPartition(topic, i, 100 + i, metadata=meta)
                if ok:
                    got = c.commit(offsets=[tp], asynchronous=False)
                    assert got is not None and got[0].error is None, (i, got)
                else:
                    with pytest.raises(KafkaException) as e:
                        c.commit(offsets=[tp], asynchronous=False)
                    assert e.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE, i
            committed = c.committed([TopicPartition(topic, i)
                                     for i in range(1, len(cases) + 1)], timeout=30)
            for tp, (meta, ok) in zip(committed, cases, strict=True):
                if ok:
                    assert (tp.offset, tp.metadata) == (100 + tp.partition, meta), tp.partition
                else:
                    assert tp.offset < 0, (tp.partition, tp.offset)
        finally:
            c.close()
