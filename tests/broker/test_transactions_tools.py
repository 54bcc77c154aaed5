"""`kafkactl transactions` (Kafka's kafka-transactions tool) against a real broker, and the
APIs under it: ListTransactions, DescribeTransactions, DescribeProducers, WriteTxnMarkers
from an admin (a hanging transaction found and aborted)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until

from .txn_helpers import committed_values, markers
from .wire import Wire, batch


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here use transactional ids and topics of their own."""
    return module_broker


def kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=60)


def _json(*args: str) -> Any:
    r = kafkactl("transactions", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_list_describe_and_producers_of_an_open_transaction(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic, tid, b = "txn-tools-open", "tid-tools-open", broker.bootstrap
    with Wire(b) as w:
        w.create_topic(topic)
    p = Producer({"bootstrap.servers": b, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v0")
    p.produce(topic, b"v1")
    p.flush(30)

    listed = {t["transactional_id"]: t for t in _json("list", "-b", b)}
    assert listed[tid]["state"] == "Ongoing" and listed[tid]["coordinator"] == 0
    pid = listed[tid]["producer_id"]
    assert tid in {t["transactional_id"] for t in _json("list", "--state", "Ongoing", "-b", b)}
    assert tid not in {t["transactional_id"]
                       for t in _json("list", "--state", "CompleteCommit", "-b", b)}
    r = kafkactl("transactions", "list", "--state", "NoSuchState", "-b", b)
    assert r.returncode == 2 and "'NoSuchState'" in r.stderr, r.stderr
    assert [t["transactional_id"] for t in _json("list", "--producer-id", str(pid), "-b", b)] \
        == [tid]

    d = _json("describe", "-t", tid, "-b", b)
    assert (d["state"], d["producer_id"], d["producer_epoch"]) == ("Ongoing", pid, 0)
    assert d["partitions"] == [{"topic": topic, "partition": 0}]
    assert d["start_time_ms"] > 0 and d["duration_ms"] >= 0 and d["timeout_ms"] == 60000

    (prod,) = _json("describe-producers", "--topic", topic, "--partition", "0", "-b", b)
    assert (prod["producer_id"], prod["producer_epoch"]) == (pid, 0)
    assert prod["current_txn_start_offset"] == 0 and prod["last_sequence"] == 1
    # known to its coordinator as ongoing: not hanging, however old
    assert _json("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                 "-b", b) == []

    p.commit_transaction(30)
    wait_until(lambda: _json("describe", "-t", tid, "-b", b)["state"] == "CompleteCommit", 10,
               "CompleteCommit")
    r = kafkactl("transactions", "describe", "-t", "tid-tools-unknown", "-b", b)
    assert r.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in r.stderr
    table = kafkactl("transactions", "list", "-b", b)
    assert table.returncode == 0 and "TransactionalId" in table.stdout and tid in table.stdout


def test_hanging_transaction_found_and_aborted(broker_factory: Any) -> None:
    # a hanging transaction is what a leader without KIP-890's check lets in (Kafka's
    # transaction.partition.verification.enable=false, or a broker before 3.6)
    broker = broker_factory(transaction_partition_verification_enable="false")
    topic, b = "txn-tools-hanging", broker.bootstrap
    with Wire(b) as w:
        w.create_topic(topic)
        init = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})
        pid = init["producer_id"]
        # a transactional batch the coordinator never heard of (no AddPartitionsToTxn):
        # what a lost coordinator state or a broken client leaves behind
        r = w.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "tid-ghost", "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch(
                [b"ghost"], producer_id=pid, producer_epoch=0, base_sequence=0,
                is_transactional=True)}]}]})
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        w.produce(topic, batch([b"plain"]))

    hanging = _json("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                    "-b", b)
    assert [(h["producer_id"], h["current_txn_start_offset"]) for h in hanging] == [(pid, 0)]
    by_broker = _json("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0",
                      "-b", b)
    assert [(h["producer_id"], h["current_txn_start_offset"]) for h in by_broker
            if h["topic"] == topic] == [(pid, 0)]
    # young enough to be a transaction still being written: not a candidate
    assert _json("find-hanging", "--topic", topic, "-b", b) == []
    assert committed_values(broker.data_dir, topic) == [b"plain"]

    r = kafkactl("transactions", "abort", "--topic", topic, "--partition", "0",
                 "--start-offset", "1", "-b", b)
    assert r.returncode == 1 and "no open transaction starts at offset 1" in r.stderr
    r = kafkactl("transactions", "abort", "--topic", topic, "--partition", "0",
                 "--start-offset", "0", "-b", b)
    assert r.returncode == 0, r.stderr
    assert f"producer {pid}" in r.stdout
    assert markers(broker.data_dir, topic) == [("ABORT", pid, 0)]
    assert _json("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                 "-b", b) == []
    (prod,) = _json("describe-producers", "--topic", topic, "--partition", "0", "-b", b)
    assert prod["current_txn_start_offset"] == -1


def test_bad_arguments_and_refusals(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    r = kafkactl("transactions", "find-hanging", "-b", b)
    assert r.returncode == 2 and "--broker-id or --topic" in r.stderr
    r = kafkactl("transactions", "abort", "--topic", "t", "--partition", "0", "-b", b)
    assert r.returncode == 2 and "--start-offset" in r.stderr
    r = kafkactl("transactions", "describe-producers", "--topic", "no-such-topic-x",
                 "--partition", "0", "-b", b)
    assert r.returncode == 1 and "no-such-topic-x" in r.stderr
    with Wire(b) as w:
        # DescribeProducers of a partition this broker does not have
        r2 = w.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "no-such-topic-y", "partition_indexes": [0]}]})
        assert r2["topics"][0]["partitions"][0]["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # WriteTxnMarkers for a partition it does not have
        r3 = w.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": False,
            "coordinator_epoch": 0, "topics": [{"name": "no-such-topic-z",
                                                "partition_indexes": [0]}]}]})
        assert r3["markers"][0]["topics"][0]["partitions"][0]["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert not (broker.data_dir / "no-such-topic-z-0").exists()


def test_dump_log_transaction_log_decoder(broker: BrokerProcess) -> None:
    """`dump-log --transaction-log-decoder` prints __transaction_state records as Kafka's
    DumpLogSegments does (key {"type","data"}, payload {"version","data"})."""
    from kafkactl.broker.coordinator.group_metadata_manager import partition_for

    tid = "tid-tools-dump"
    with Wire(broker.bootstrap) as w:
        assert w.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})[
            "error_code"] == 0
        r = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout_ms": 12345, "producer_id": -1,
            "producer_epoch": -1})
        assert r["error_code"] == 0
    seg = broker.data_dir / f"__transaction_state-{partition_for(tid, 50)}" / \
        "00000000000000000000.log"
    out = kafkactl("dump-log", "--transaction-log-decoder", "--json", str(seg))
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()
               if '"transactionalId"' in line]
    mine = [x for x in records if x["key"]["data"]["transactionalId"] == tid]
    assert mine and mine[-1]["key"]["type"] == "0"
    assert mine[-1]["payload"] == {"version": "0", "data": {
        "producerId": r["producer_id"], "producerEpoch": 0, "transactionTimeoutMs": 12345,
        "transactionStatus": 0, "transactionPartitions": None,
        "transactionLastUpdateTimestampMs":
            mine[-1]["payload"]["data"]["transactionLastUpdateTimestampMs"],
        "transactionStartTimestampMs": -1}}
    text = kafkactl("dump-log", "--transaction-log-decoder", str(seg))
    assert f'key: {{"type":"0","data":{{"transactionalId":"{tid}"}}}} payload: ' \
        '{"version":"0","data":{"producerId":' in text.stdout
    both = kafkactl("dump-log", "--transaction-log-decoder", "--offsets-decoder", str(seg))
    assert both.returncode == 2 and "give one" in both.stderr
