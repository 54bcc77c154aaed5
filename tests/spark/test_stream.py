"""spark.readStream.format("kafkactl"): offsets in the checkpoint, maxOffsetsPerTrigger, new
partitions and topics picked up, exactly once across a restart (Parquet sink)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.spark.stream import cap
from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until
from tests.spark.conftest import create_topic, produce


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own (the pattern matches only its own test's): one
    broker for the module."""
    return module_broker


def run_available_now(spark: Any, bootstrap: str, out: Path, checkpoint: Path) -> list[int]:
    """One query run (Trigger.AvailableNow); the rows of each micro-batch it ran."""
    query = (spark.readStream.format("kafkactl").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribePattern", r"s\..*").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "7").load()
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .start())
    assert query.awaitTermination(240), "the query did not finish"
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def written(spark: Any, out: Path) -> list[tuple[str, int, int]]:
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    return sorted((r.topic, r.partition, r.offset) for r in rows)


def test_stream_resumes_from_checkpoint_exactly_once(spark: Any, broker: Any,
                                                     tmp_path: Path) -> None:
    b, out, ck = broker.bootstrap, tmp_path / "out", tmp_path / "checkpoint"
    create_topic(b, "s.a", 2)
    produce(b, "s.a", [(p, None, b"r1", None) for p in (0, 1) for _ in range(10)])
    batches = run_available_now(spark, b, out, ck)
    assert sum(batches) == 20 and max(batches) <= 7 and len(batches) >= 3
    assert written(spark, out) == [("s.a", p, o) for p in (0, 1) for o in range(10)]

    # while the query is down: more records, a new partition, a new matching topic
    produce(b, "s.a", [(p, None, b"r2", None) for p in (0, 1) for _ in range(5)])
    with AdminClient(b) as admin:
        assert admin.create_partitions({"s.a": 3})["s.a"] is None
    produce(b, "s.a", [(2, None, b"r2", None) for _ in range(3)])
    create_topic(b, "s.b", 1)
    produce(b, "s.b", [(0, None, b"r2", None) for _ in range(4)])
    batches = run_available_now(spark, b, out, ck)
    assert sum(batches) == 17 and max(batches) <= 7
    assert written(spark, out) == sorted(
        [("s.a", p, o) for p in (0, 1) for o in range(15)]
        + [("s.a", 2, o) for o in range(3)] + [("s.b", 0, o) for o in range(4)])


def test_write_stream_copies_a_topic_in_transactions(spark: Any, broker: Any,
                                                     tmp_path: Path) -> None:
    """Each micro-batch's rows in transactions its driver commits (the writer's
    transactional option): two batches, every task attempt's id used again by the next
    batch's task, read back read_committed."""
    import json

    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.transaction_admin import TransactionAdmin

    b = broker.bootstrap
    create_topic(b, "src", 2)
    create_topic(b, "copy", 1)
    produce(b, "src", [(i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(12)])
    query = (spark.readStream.format("kafkactl").option("bootstrap", b)
             .option("subscribe", "src").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "6").load()
             .select("key", "value")  # no topic column: the topic option applies
             .writeStream.format("kafkactl").option("bootstrap", b).option("topic", "copy")
             .option("transactional", "true").option("transactionalIdPrefix", "copier")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
             .start())
    assert query.awaitTermination(240) and query.exception() is None
    assert len(query.recentProgress) == 2
    out = zygote.run(["consume", "-b", b, "-t", "copy", "--from-beginning", "-e", "-J", "-q",
                      "--isolation-level", "read_committed"],
                     text=True, timeout=60, check=True).stdout
    assert sorted((r["key"], r["payload"]) for r in map(json.loads, out.splitlines())) == \
        sorted((f"k{i}", f"v{i}") for i in range(12))
    client = KafkaClient(b)
    try:
        ids = {t.transactional_id: t.state for t in TransactionAdmin(client).list_transactions()
               if t.transactional_id.startswith("copier-")}
    finally:
        client.close()
    assert ids and set(ids.values()) == {"CompleteCommit"}


def test_max_offsets_per_trigger_is_shared_in_proportion() -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    latest = {("t", 0): 30, ("t", 1): 20, ("t", 2): 5}
    end = cap(start, latest, 8)
    assert sum(end[tp] - start[tp] for tp in start) == 8
    assert end == {("t", 0): 6, ("t", 1): 12, ("t", 2): 5}
    assert cap(start, latest, 100) == latest


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(spark: Any,
                                                                broker: Any) -> None:
    """minOffsetsPerTrigger / maxTriggerDelay as Spark's connector: a micro-batch is held
    back while fewer offsets wait, until maxTriggerDelay has passed since the last one; the
    first trigger of a run is never held."""
    from kafkactl.spark.stream import KafkactlStreamReader

    b = broker.bootstrap
    create_topic(b, "held", 1)
    produce(b, "held", [(0, None, b"x", None)] * 3)
    options = {"bootstrap": b, "subscribe": "held", "startingOffsets": "earliest",
               "minOffsetsPerTrigger": "5", "maxTriggerDelay": "1h"}
    r = KafkactlStreamReader(dict(options))
    limit = r.getDefaultReadLimit()
    start = r.initialOffset()
    assert start == {"held": {"0": 0}}
    first = r.latestOffset(start, limit)
    assert first == {"held": {"0": 3}}
    produce(b, "held", [(0, None, b"x", None)] * 2)
    assert r.latestOffset(first, limit) == first  # 2 waiting < 5: held back
    produce(b, "held", [(0, None, b"x", None)] * 3)
    assert r.latestOffset(first, limit) == {"held": {"0": 8}}

    short = KafkactlStreamReader({**options, "maxTriggerDelay": "50ms"})
    at = short.latestOffset(first, limit)
    assert at == {"held": {"0": 8}}  # the first trigger
    produce(b, "held", [(0, None, b"x", None)])
    wait_until(lambda: short.latestOffset(at, limit) == {"held": {"0": 9}}, timeout=60,
               what="the batch held back until maxTriggerDelay passed")

    # the options reach a streaming query, and a streaming read with them runs
    query = (spark.readStream.format("kafkactl").options(**options)
             .option("maxTriggerDelay", "15m").load()
             .writeStream.format("memory").queryName("held_rows")
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240) and query.exception() is None
    assert spark.sql("SELECT count(*) AS n FROM held_rows").collect()[0].n == 9
