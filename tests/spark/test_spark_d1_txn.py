"""Transactions seen from the data source's driver, against a real broker (no Spark job):
a read_committed range past the last stable offset is named as such, and a transactional
write's start fences only what an earlier run really left open."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from kafkactl.client.transaction_admin import TransactionAdmin
from kafkactl.spark.options import DataLossError, parse_read_options
from kafkactl.spark.planner import OffsetRange, plan
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics and transactional ids of their own."""
    return module_broker


def describe(bootstrap: str, transactional_id: str) -> Any:
    client = KafkaClient(bootstrap)
    try:
        return TransactionAdmin(client).describe(transactional_id)
    finally:
        client.close()


def open_transaction(bootstrap: str, transactional_id: str, topic: str,
                     values: list[bytes]) -> Producer:
    """A producer whose transaction holds `values`, acknowledged, and is left open."""
    p = Producer(bootstrap, transactional_id=transactional_id, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for v in values:
        p.send(topic, v, partition=0)
    assert p.flush(30)
    return p


def test_read_committed_past_the_last_stable_offset_names_it(
        broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Offsets 0-1 committed (2: its marker), 3 in a transaction still open: the last
    stable offset is 3, the high watermark 4. An ending offset of 4 read_committed is past
    the former, not "past the log end offset 3"."""
    b = broker.bootstrap
    create_topic(b, "d1-open", 1)
    committed = open_transaction(b, "d1-open-committed", "d1-open", [b"c0", b"c1"])
    committed.commit_transaction()
    committed.close()
    still_open = open_transaction(b, "d1-open-open", "d1-open", [b"open"])
    try:
        def options(end: int, **more: str) -> Any:
            return parse_read_options({
                "bootstrap": b, "assign": json.dumps({"d1-open": [0]}),
                "endingOffsets": json.dumps({"d1-open": {"0": end}}), **more})

        committed_only = {"kafka.isolation.level": "read_committed"}
        with pytest.raises(DataLossError, match=(
                r"topic d1-open partition 0: ending offset 4 is past the last stable offset 3 "
                r"\(a transaction is open on the partition: read_committed reads stop before "
                r"its first record until it commits or aborts; the log end offset is 4\)")):
            plan(options(4, **committed_only))
        with caplog.at_level(logging.WARNING, logger="kafkactl.spark"):
            ranges, _, _ = plan(options(4, failOnDataLoss="false", **committed_only))
        assert ranges == [OffsetRange("d1-open", 0, 0, 3)]
        assert "ending offset 4 is past the last stable offset 3 (a transaction is open" \
            in caplog.text and "skipped (failOnDataLoss=false)" in caplog.text
        # past the high watermark too: the log end offset, and where read_committed stops
        with pytest.raises(DataLossError, match=(
                r"ending offset 9 is past the log end offset 4 \(read_committed reads stop "
                r"earlier, at the last stable offset 3: a transaction is open")):
            plan(options(9, **committed_only))
        # read_uncommitted reads to the high watermark: the log end offset, as it was
        with pytest.raises(DataLossError, match=r"ending offset 9 is past the log end offset "
                                                r"4; set failOnDataLoss"):
            plan(options(9))
    finally:
        still_open.abort_transaction()
        still_open.close()


def test_a_named_prefix_reports_only_transactions_really_left_open(
        broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A run whose task was retried fenced the failed attempt's id in its own sweep: Empty,
    nothing in it. The next run with the prefix reported it (and fenced it again) as "left
    open", and so every run after; now only an Ongoing transaction is aborted and named."""
    from kafkactl.spark.txn_write import TxnTarget, abort_all, fence_leftovers

    b = broker.bootstrap
    create_topic(b, "d1-fence", 1)
    target = TxnTarget(b, "d1-run", 60000)
    failed = open_transaction(b, "d1-run-1-0", "d1-fence", [b"failed-attempt"])
    failed.abort()  # (the attempt's process is gone; its transaction is open)
    abort_all(target, [])  # the first run's sweep fences it
    fenced = describe(b, "d1-run-1-0")
    assert fenced.state in ("Empty", "CompleteAbort") and not fenced.partitions

    with caplog.at_level(logging.WARNING, logger="kafkactl.spark.txn_write"):
        assert fence_leftovers(target) == []
    assert "left open" not in caplog.text
    # not fenced again: the epoch is the one the first run's sweep left
    assert describe(b, "d1-run-1-0").producer_epoch == fenced.producer_epoch

    # a driver that died with its task's transaction open: that one is aborted and named
    lost = open_transaction(b, "d1-run-0-0", "d1-fence", [b"lost"])
    lost.abort()
    with caplog.at_level(logging.WARNING, logger="kafkactl.spark.txn_write"):
        assert fence_leftovers(target) == ["d1-run-0-0"]
    assert "aborted 1 transaction(s) an earlier run of prefix d1-run left open: d1-run-0-0" \
        in caplog.text
    assert describe(b, "d1-run-0-0").state in ("Empty", "CompleteAbort")
