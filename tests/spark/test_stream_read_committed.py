"""spark.readStream.format("kafkactl") reading read_committed names the bound it reads to:
an offset past the last stable offset (a transaction open on the partition) is said to be
past the last stable offset, not "past the log end offset" (the batch planner's words,
kafkactl.spark.planner.end_of_log). Real broker, real Spark session, real checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.producer import Producer
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics and transactional ids of their own."""
    return module_broker


def transaction(bootstrap: str, transactional_id: str, topic: str,
                values: list[bytes]) -> Producer:
    """A producer whose transaction holds `values` (acknowledged), still open."""
    p = Producer(bootstrap, transactional_id=transactional_id, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for v in values:
        p.send(topic, v, partition=0)
    assert p.flush(30)
    return p


def run(spark: Any, bootstrap: str, checkpoint: Path, *, committed: bool,
        fail_batch: bool = False) -> Any:
    """One Trigger.AvailableNow run of the query on topic sc-lso; its exception (or None).
    `fail_batch`: the sink fails each micro-batch, after Spark logged its offsets."""
    from pyspark.errors import StreamingQueryException

    reader = (spark.readStream.format("kafkactl").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "sc-lso").option("startingOffsets", "earliest"))
    if committed:
        reader = reader.option("kafka.isolation.level", "read_committed")
    writer = reader.load().writeStream.option("checkpointLocation", str(checkpoint))
    if fail_batch:
        def sink(_df: Any, batch_id: int) -> None:
            raise RuntimeError(f"sink refuses batch {batch_id}")
        writer = writer.foreachBatch(sink)
    else:
        writer = writer.format("noop")
    query = writer.trigger(availableNow=True).start()
    try:
        finished = query.awaitTermination(240)
    except StreamingQueryException as e:  # (it raises the query's exception)
        return e
    assert finished, "the query did not finish"
    return query.exception()


def test_stream_read_committed_names_the_last_stable_offset(spark: Any, broker: Any,
                                                            tmp_path: Path) -> None:
    """Offsets 0-1 committed (2: their marker), 3 in a transaction still open: the last
    stable offset is 3, the high watermark 4. A query that read to 4 read_uncommitted,
    restarted read_committed, is past the last stable offset: when it plans its next
    micro-batch (latestOffset), and when it re-runs a micro-batch logged but not committed
    (partitions)."""
    b = broker.bootstrap
    create_topic(b, "sc-lso", 1)
    done = transaction(b, "sc-lso-committed", "sc-lso", [b"c0", b"c1"])
    done.commit_transaction()
    done.close()
    still_open = transaction(b, "sc-lso-open", "sc-lso", [b"open"])
    try:
        bound = ("the last stable offset 3 (a transaction is open on the partition: "
                 "read_committed reads stop before its first record until it commits or "
                 "aborts; the log end offset is 4)")
        # the next micro-batch: the checkpoint's committed offset 4 is past the LSO
        ahead = tmp_path / "ahead"
        assert run(spark, b, ahead, committed=False) is None
        error = run(spark, b, ahead, committed=True)
        assert error is not None, "read_committed past the last stable offset: no error"
        assert f"topic sc-lso partition 0: the query's offset 4 is past {bound}" \
            in str(error), str(error)

        # a micro-batch logged to end at 4, not committed (its sink failed), run again
        logged = tmp_path / "logged"
        assert "sink refuses batch 0" in str(run(spark, b, logged, committed=False,
                                                 fail_batch=True))
        error = run(spark, b, logged, committed=True)
        assert error is not None, "read_committed past the last stable offset: no error"
        assert f"topic sc-lso partition 0: offset 4 is past {bound}" in str(error), str(error)
    finally:
        still_open.abort_transaction()
        still_open.close()
