"""`kafkactl transactions` decides as Kafka's kafka-transactions.sh (TransactionsCommand)
does, against a real broker:

- find-hanging: an open transaction is hanging unless its coordinator lists that partition
  among the transaction's (DescribeTransactions' topics: an Ongoing transaction's and, in
  PrepareCommit / PrepareAbort, those still waiting for their marker), whatever the state
  and producer epoch (filterHangingTransactions);
- list --state: the state names in any case; a name no state has is a usage error naming it
  (a broker would match nothing with it and list it in unknown_state_filters);
- abort with explicit ids: a negative --coordinator-epoch (what DescribeProducers shows for a
  producer never marked) is written as 0; a missing --producer-epoch / --coordinator-epoch
  is named as Kafka names it."""

from __future__ import annotations

import json
import time
from typing import Any

from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.transaction_admin import TransactionAdmin
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.conftest import BrokerProcess

from .txn_helpers import batches, markers
from .wire import Wire, batch

HOUR_MS = 3600 * 1000


def kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=60)


def _json(*args: str) -> Any:
    r = kafkactl("transactions", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _produce(w: Wire, txn_id: str, topic: str, partition: int, records: bytes) -> None:
    """A transactional batch appended without AddPartitionsToTxn (no KIP-890 check)."""
    r = w.request(ApiKey.PRODUCE, 9, {
        "transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    assert r["responses"][0]["partition_responses"][0]["error_code"] == 0, r


def test_a_transaction_still_to_be_marked_is_not_hanging(broker_factory: Any) -> None:
    """A committed transaction whose COMMIT marker has not reached a partition yet (here:
    never will, the leader refuses it as fenced) is in its coordinator's PrepareCommit with
    that partition: Kafka's find-hanging does not show it (an abort --start-offset would
    write ABORT into a committed transaction). The same producer's open transaction on a
    partition the coordinator never heard of is hanging."""
    from confluent_kafka import Producer

    broker = broker_factory(transaction_partition_verification_enable="false")
    topic, tid, b = "txn-rules-prepare", "tid-rules-prepare", broker.bootstrap
    old = int(time.time() * 1000) - HOUR_MS  # older than any transaction may run
    with Wire(b) as w:
        w.create_topic(topic, partitions=2)
    p = Producer({"bootstrap.servers": b, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0, timestamp=old)
    p.flush(30)
    (listing,) = [t for t in _json("list", "-b", b) if t["transactional_id"] == tid]
    pid = listing["producer_id"]
    with Wire(b) as w:
        # the same producer id at a newer epoch writes transactionally to both partitions
        # (what a broker without KIP-890's check lets in): on partition 0 the open
        # transaction now has epoch 1, so the coordinator's epoch-0 COMMIT marker is
        # refused there (INVALID_PRODUCER_EPOCH) and the commit stays PrepareCommit
        for partition in (0, 1):
            _produce(w, tid, topic, partition, batch(
                [b"epoch-1"], producer_id=pid, producer_epoch=1, base_sequence=0,
                is_transactional=True, timestamp=old))
    p.commit_transaction(30)

    d = _json("describe", "-t", tid, "-b", b)
    assert (d["state"], d["producer_id"], d["producer_epoch"]) == ("PrepareCommit", pid, 0)
    assert d["partitions"] == [{"topic": topic, "partition": 0}]
    for partition in (0, 1):
        (prod,) = _json("describe-producers", "--topic", topic, "--partition",
                        str(partition), "-b", b)
        assert (prod["producer_id"], prod["producer_epoch"],
                prod["current_txn_start_offset"]) == (pid, 1, 0)

    hanging = _json("find-hanging", "--topic", topic, "-b", b)
    assert [(h["topic"], h["partition"], h["producer_id"]) for h in hanging] == \
        [(topic, 1, pid)], hanging
    assert _json("find-hanging", "--topic", topic, "--partition", "0", "-b", b) == []
    by_broker = _json("find-hanging", "--broker-id", "0", "-b", b)
    assert [(h["topic"], h["partition"]) for h in by_broker if h["topic"] == topic] == \
        [(topic, 1)]
    # Kafka takes --topic and --broker-id together: that topic's partitions on that broker
    both = _json("find-hanging", "--broker-id", "0", "--topic", topic, "-b", b)
    assert [(h["topic"], h["partition"]) for h in both] == [(topic, 1)]
    assert markers(broker.data_dir, topic, 0) == [] and markers(broker.data_dir, topic, 1) == []


def test_list_state_names(module_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic, tid, b = "txn-rules-list", "tid-rules-list", module_broker.bootstrap
    with Wire(b) as w:
        w.create_topic(topic)
    p = Producer({"bootstrap.servers": b, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v")
    p.flush(30)
    try:
        for name in ("ongoing", "ONGOING", "Ongoing"):
            listed = _json("list", "--state", name, "-b", b)
            assert {(t["transactional_id"], t["state"]) for t in listed
                    if t["transactional_id"] == tid} == {(tid, "Ongoing")}, name
        assert tid not in {t["transactional_id"]
                           for t in _json("list", "--state", "completecommit", "-b", b)}
        r = kafkactl("transactions", "list", "--state", "Ongoing", "--state", "Bogus",
                     "-b", b)
        assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
        assert "'Bogus'" in r.stderr and "PrepareCommit" in r.stderr, r.stderr
        # what the broker says of a name it does not know (the client reports it)
        admin = TransactionAdmin(KafkaClient(b))
        try:
            listed, unknown = admin.list_transactions_and_unknown_states(["Ongoing", "Bogus"])
        finally:
            admin.client.close()
        assert unknown == {0: ["Bogus"]} and tid in {t.transactional_id for t in listed}
    finally:
        p.abort_transaction(30)


def test_abort_negative_coordinator_epoch_is_written_as_0(broker_factory: Any) -> None:
    broker = broker_factory(transaction_partition_verification_enable="false")
    topic, b = "txn-rules-abort", broker.bootstrap
    with Wire(b) as w:
        w.create_topic(topic)
        pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})["producer_id"]
        # a transaction no coordinator heard of: never marked, coordinator epoch -1
        _produce(w, "tid-rules-ghost", topic, 0, batch(
            [b"ghost"], producer_id=pid, producer_epoch=0, base_sequence=0,
            is_transactional=True))
    (h,) = _json("find-hanging", "--topic", topic, "--max-transaction-timeout", "0", "-b", b)
    assert (h["producer_id"], h["producer_epoch"], h["coordinator_epoch"]) == (pid, 0, -1)

    base = ("transactions", "abort", "--topic", topic, "--partition", "0", "-b", b)
    # find-hanging's CoordinatorEpoch -1 as given: written as 0, as Kafka's tool does
    r = kafkactl(*base, "--producer-id", str(pid), "--producer-epoch", "0",
                 "--coordinator-epoch", "-1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["coordinator_epoch"] == 0
    (marker,) = [x for x in batches(broker.data_dir, topic) if x.control]
    assert (marker.marker, marker.producer_id, marker.coordinator_epoch) == ("ABORT", pid, 0)
    (prod,) = _json("describe-producers", "--topic", topic, "--partition", "0", "-b", b)
    assert (prod["current_txn_start_offset"], prod["coordinator_epoch"]) == (-1, 0)


def test_abort_names_the_missing_id(module_broker: BrokerProcess) -> None:
    topic, b = "txn-rules-abort-args", module_broker.bootstrap
    with Wire(b) as w:
        w.create_topic(topic)
    pid = 1  # (refused before any request)
    base = ("transactions", "abort", "--topic", topic, "--partition", "0", "-b", b)
    r = kafkactl(*base, "--producer-id", str(pid), "--coordinator-epoch", "-1")
    assert r.returncode == 2 and "Missing required argument --producer-epoch" in r.stderr, \
        r.stderr
    r = kafkactl(*base, "--producer-id", str(pid), "--producer-epoch", "0")
    assert r.returncode == 2 and "Missing required argument --coordinator-epoch" in r.stderr, \
        r.stderr
    r = kafkactl(*base, "--producer-epoch", "0", "--coordinator-epoch", "0")
    assert r.returncode == 2 and "--start-offset" in r.stderr and "--producer-id" in r.stderr
    assert markers(module_broker.data_dir, topic) == []

