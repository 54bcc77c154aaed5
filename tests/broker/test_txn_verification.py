"""KIP-890 part 1 on the partition leader (kafkactl.broker.txn_verification): a
transactional batch that would open a transaction on a partition is appended only when its
coordinator has that partition in the producer's ongoing transaction. Real brokers, raw
requests (a client library always calls AddPartitionsToTxn first, so it cannot send the
batches under test)."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.builder import RecordBatchBuilder
from tests.broker.wire import Wire
from tests.polling import wait_until

INVALID_TXN_STATE = 48
INVALID_PRODUCER_EPOCH = 47


def _batch(pid: int, epoch: int, seq: int, *values: str) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    for v in values:
        b.append(None, None, v.encode())
    return b.build()


def _produce(w: Any, txn_id: str, topic: str, partition: int, records: bytes) -> int:
    body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}
    resp = w(ApiKey.PRODUCE, 9, body)
    return int(resp["responses"][0]["partition_responses"][0]["error_code"])


def _latest(w: Any, topic: str, partition: int = 0) -> int:
    resp = w(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return int(resp["topics"][0]["partitions"][0]["offset"])


def _init(w: Any, txn_id: str) -> tuple[int, int]:
    def ready() -> tuple[int, int] | None:
        found = w(ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        if found["error_code"] != 0:
            return None
        r = w(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn_id,
                                           "transaction_timeout_ms": 60000,
                                           "producer_id": -1, "producer_epoch": -1})
        return (r["producer_id"], r["producer_epoch"]) if r["error_code"] == 0 else None
    # the first FindCoordinator creates __transaction_state; its leaders load it
    return wait_until(ready, 90, "a producer id for the transactional id")


def _add(w: Any, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
    r = w(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
    return int(r["results_by_topic_v3_and_below"][0]["results_by_partition"][0]
               ["partition_error_code"])


def _end(w: Any, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = w(ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": pid,
                              "producer_epoch": epoch, "committed": commit})
    return int(r["error_code"])


def test_a_batch_outside_its_transaction_is_refused_and_nothing_stored(broker) -> None:
    with Wire(broker.bootstrap) as wire:
        w = wire.request
        assert wire.create_topic("v", partitions=1)["error_code"] == 0
        pid, epoch = _init(w, "v-txn")
        # no AddPartitionsToTxn: the batch would open a transaction no coordinator knows
        assert _produce(w, "v-txn", "v", 0, _batch(pid, epoch, 0, "stray")) == \
            INVALID_TXN_STATE
        assert _latest(w, "v") == 0
        assert _add(w, "v-txn", pid, epoch, "v", 0) == 0
        assert _produce(w, "v-txn", "v", 0, _batch(pid, epoch, 0, "a", "b")) == 0
        assert _produce(w, "v-txn", "v", 0, _batch(pid, epoch, 2, "c")) == 0  # open: no ask
        assert _end(w, "v-txn", pid, epoch, commit=True) == 0
        wait_until(lambda: _latest(w, "v") == 4, 30, "the commit marker")  # 3 records, marker
        end = 4
        # a late batch of the ended transaction (a retry that lost its way) opens nothing
        assert _produce(w, "v-txn", "v", 0, _batch(pid, epoch, 3, "late")) == \
            INVALID_TXN_STATE
        assert _latest(w, "v") == end
        # a fenced producer (another InitProducerId bumped the epoch)
        _pid2, epoch2 = _init(w, "v-txn")
        assert epoch2 > epoch
        assert _produce(w, "v-txn", "v", 0, _batch(pid, epoch, 3, "zombie")) == \
            INVALID_PRODUCER_EPOCH
        assert _latest(w, "v") == end


def test_the_check_is_off_with_kafkas_switch(broker_factory) -> None:
    b = broker_factory(transaction_partition_verification_enable="false")
    with Wire(b.bootstrap) as wire:
        w = wire.request
        assert wire.create_topic("off", partitions=1)["error_code"] == 0
        pid, epoch = _init(w, "off-txn")
        assert _produce(w, "off-txn", "off", 0, _batch(pid, epoch, 0, "unchecked")) == 0
        assert _latest(w, "off") == 1
