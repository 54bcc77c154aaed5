"""A real broker's start-up (and `kafkactl recover` before it) with a segment lost or a log
torn below its log start, as Kafka's LogLoader handles them:

- a middle `.log` removed after a clean stop: only its offsets are lost; a consumer reads
  every offset before and after the gap (the broker used to delete every later segment);
- DeleteRecords up to the log end, a kill -9, a torn tail: the log restarts empty at the
  log start (1 segment at the checkpoint's offset), new records get offsets after it and a
  group that committed at the log start reads them (the log start used to move back, the
  purged offsets were handed out again and the group was out of range)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.log.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_checkpoint
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.broker.wire import Wire, batch
from tests.groups.helpers import kafkactl
from tests.polling import wait_until


def _list_offset(w: Wire, topic: str, timestamp: int) -> int:
    resp = w.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return int(p["offset"])


def _produce(w: Wire, topic: str, values: list[bytes]) -> int:
    """The base offset the broker gave the batch."""
    got = wait_until(lambda: (r := w.produce(topic, batch(values)))["error_code"] == 0 and r,
                     20, f"a produce to {topic} to succeed")
    return int(got["base_offset"])


def _consume(bootstrap: str, topic: str, until: int, *, group: str | None = None,
             reset: str = "earliest") -> list[tuple[int, bytes]]:
    """Every record a kafka-python consumer reads from partition 0 (from the beginning,
    or with `group` from its committed offset) until it has read offset `until`."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset=reset)
    try:
        c.assign([tp])
        if group is None:
            c.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []

        def read() -> bool:
            for records in c.poll(timeout_ms=200).values():
                got.extend((m.offset, m.value) for m in records)
            return bool(got) and got[-1][0] >= until

        wait_until(read, 30, f"the consumer to read up to offset {until}")
        return got
    finally:
        c.close()


def _base(p: Path) -> int:
    return int(p.name[:20])


def test_missing_middle_segment_after_a_clean_stop_loses_only_its_offsets(
        broker_factory: Any) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        assert w.create_topic("t", configs={"segment.bytes": "4096"})["error_code"] == 0
        for i in range(60):
            _produce(w, "t", [b"value-%d" % (i * 10 + j) for j in range(10)])
    end = 600
    assert b.stop() == 0  # a clean stop: no recovery at the next start
    d = b.data_dir / "t-0"
    logs = sorted(d.glob("*.log"))
    assert len(logs) >= 4
    lost = range(_base(logs[1]), _base(logs[2]))
    logs[1].unlink()  # its .index and .timeindex are left
    b.start()
    got = _consume(b.bootstrap, "t", end - 1)
    assert [o for o, _v in got] == [o for o in range(end) if o not in lost]
    assert all(v == b"value-%d" % o for o, v in got)
    with Wire(b.bootstrap) as w:
        assert (_list_offset(w, "t", -2), _list_offset(w, "t", -1)) == (0, end)
    text = " ".join(b.log().split())
    assert f"offsets {lost.start}..{lost.stop - 1} are lost" in text
    assert "later segments are kept" in text and "deleted the" not in text
    assert sorted(d.glob("*.log")) == logs[:1] + logs[2:]


@pytest.mark.parametrize("recover", [False, True], ids=["broker-start", "kafkactl-recover"])
def test_torn_log_below_its_log_start_restarts_at_the_log_start(
        broker_factory: Any, recover: bool) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        assert w.create_topic("p")["error_code"] == 0
        for i in range(10):
            _produce(w, "p", [b"old-%d" % (i * 10 + j) for j in range(10)])
    start = 100
    got = _consume(b.bootstrap, "p", start - 1, group="g1")
    assert len(got) == start
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g1", enable_auto_commit=False)
    c.assign([TopicPartition("p", 0)])
    c.commit({TopicPartition("p", 0): OffsetAndMetadata(start, "")})
    c.close()
    with Wire(b.bootstrap) as w:
        r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "p", "partitions": [
            {"partition_index": 0, "offset": start}]}], "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
    checkpoint = b.data_dir / LOG_START_OFFSET_CHECKPOINT
    wait_until(lambda: checkpoint.exists() and read_checkpoint(checkpoint).get(("p", 0))
               == start, 20, "the log-start-offset checkpoint to say 100")
    b.kill()  # no clean shutdown: the next start recovers
    (seg,) = sorted((b.data_dir / "p-0").glob("*.log"))
    seg.write_bytes(seg.read_bytes()[:-30])  # the last batch is torn
    if recover:
        r = kafkactl("recover", str(b.data_dir))
        assert r.returncode == 0, r.stdout + r.stderr
        text = " ".join(r.stdout.split())
        assert f"below its log start offset {start}" in text
        assert f"restarted the log empty at offset {start}" in text
    b.start()
    with Wire(b.bootstrap) as w:
        assert (_list_offset(w, "p", -2), _list_offset(w, "p", -1)) == (start, start)
        assert _produce(w, "p", [b"new-0", b"new-1"]) == start  # never an offset again
    assert [p.name for p in (b.data_dir / "p-0").glob("*.log")] == [f"{start:020d}.log"]
    if not recover:
        assert f"below its log start offset {start}" in " ".join(b.log().split())
    # the group committed at the log start resumes there and reads the new records
    assert _consume(b.bootstrap, "p", start + 1, group="g1", reset="latest") == [
        (start, b"new-0"), (start + 1, b"new-1")]
