"""TransactionStateManager: the transactional ids a coordinator serves, cached in memory and
persisted to the compacted internal topic `__transaction_state` in Kafka's TransactionLog
key/value format (Kafka's TransactionStateManager).

* A transactional id lives in partition `abs(javaStringHashCode(id)) %
  transaction.state.log.num.partitions` (50); the leader of that partition coordinates it.
* Each state change is one record (key TransactionLogKey v0, value TransactionLogValue v0;
  a Dead id is a tombstone) appended with acks=all: the change is acted on only once the
  high watermark passed it (`write`).
* A partition is replayed when this broker becomes its leader (`load_partition`); its
  coordinator epoch is the partition's leader epoch then. Until the replay is done the
  ids in it answer COORDINATOR_LOAD_IN_PROGRESS; ids of partitions led elsewhere answer
  NOT_COORDINATOR. `owned` None (a coordinator used on its own, without the broker's
  partition lifecycle) serves every partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.broker.coordinator.group_metadata_manager import partition_for
from kafkactl.broker.coordinator.transaction_metadata import (
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from kafkactl.protocol.data import decode_data, encode_data
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.messages.transaction_log import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from kafkactl.record.builder import RecordBatchBuilder

if TYPE_CHECKING:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.partition_store import PartitionStore
    from kafkactl.broker.replica_manager import ReplicaManager
    from kafkactl.broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
DEFAULT_PARTITIONS = 50
DEFAULT_SEGMENT_BYTES = 104857600
WRITE_TIMEOUT_S = 30.0


# ---- record encoding --------------------------------------------------------------------
def txn_key(transactional_id: str) -> bytes:
    return encode_data(TRANSACTION_LOG_KEY, 0, {"transactional_id": transactional_id})


def txn_value(t: TxnTransit) -> bytes | None:
    """TransactionLogValue v0; None (a tombstone) for Dead. Empty and Complete* states
    carry no partitions (Kafka writes null for Empty, an empty list otherwise)."""
    if t.state == TxnState.DEAD:
        return None
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(p)
    parts = None if t.state == TxnState.EMPTY else [
        {"topic": topic, "partition_ids": ps} for topic, ps in by_topic.items()]
    return encode_data(TRANSACTION_LOG_VALUE, 0, {
        "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "transaction_timeout_ms": t.timeout_ms, "transaction_status": int(t.state),
        "transaction_partitions": parts,
        "transaction_last_update_timestamp_ms": t.last_update_ms,
        "transaction_start_timestamp_ms": t.start_ms})


@dataclass(slots=True)
class LoadedTxn:
    transactional_id: str
    value: dict[str, Any] | None  # None: a tombstone


def decode_txn_record(key: bytes | memoryview, value: bytes | memoryview | None) -> LoadedTxn:
    _, k = decode_data(TRANSACTION_LOG_KEY, key)
    if value is None:
        return LoadedTxn(k["transactional_id"], None)
    _, v = decode_data(TRANSACTION_LOG_VALUE, value)
    return LoadedTxn(k["transactional_id"], v)


def metadata_from_value(txn_id: str, v: dict[str, Any]) -> TxnMetadata:
    parts = {(e["topic"], p) for e in v.get("transaction_partitions") or ()
             for p in e["partition_ids"]}
    return TxnMetadata(
        txn_id, v["producer_id"], last_producer_id=v.get("previous_producer_id", -1),
        producer_epoch=v["producer_epoch"], timeout_ms=v["transaction_timeout_ms"],
        state=TxnState(v["transaction_status"]), partitions=parts,
        start_ms=v["transaction_start_timestamp_ms"],
        last_update_ms=v["transaction_last_update_timestamp_ms"])


class TransactionStateManager:
    def __init__(self, config: BrokerConfig, topic_admin: TopicAdmin, partitions: PartitionStore,
                 replica_manager: ReplicaManager, *,
                 time_fn: Callable[[], float] = time.time) -> None:
        self.config = config
        self.topic_admin = topic_admin
        self.partitions = partitions
        self.replica_manager = replica_manager
        self.num_partitions = max(1, config.get_int_or("transaction.state.log.num.partitions",
                                                       DEFAULT_PARTITIONS))
        self._time = time_fn
        self.txns: dict[str, TxnMetadata] = {}
        self.loading: set[int] = set()
        # the partitions this broker leads (kafkactl.broker.replica_state says, either mode)
        self.owned: set[int] = set()
        self.coordinator_epochs: dict[int, int] = {}

    def now_ms(self) -> int:
        return int(self._time() * 1000)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_epoch(self, partition: int) -> int:
        epoch = self.coordinator_epochs.get(partition)
        if epoch is not None:
            return epoch
        part = self.partitions.get_partition(TXN_TOPIC, partition)
        return part.leader_epoch if part is not None else 0

    def check(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker serves `transactional_id` now."""
        p = self.partition_for(transactional_id)
        if p not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def owns(self, transactional_id: str, coordinator_epoch: int) -> bool:
        """Still the coordinator of `transactional_id`, at the same coordinator epoch."""
        p = self.partition_for(transactional_id)
        return self.check(transactional_id) == ErrorCode.NONE and \
            self.coordinator_epoch(p) == coordinator_epoch

    # ---- the internal topic -------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.topic_admin.topic(TXN_TOPIC) is not None

    def sync_partition_count(self) -> None:
        """Ids map to the partitions the topic has (Kafka reads its count once the topic
        exists): transaction.state.log.num.partitions only decides a new topic's."""
        state = self.topic_admin.topic(TXN_TOPIC)
        if state is not None and state.num_partitions > 0 and \
                state.num_partitions != self.num_partitions:
            log.warning("%s has %d partitions (transaction.state.log.num.partitions is %d): "
                        "using the topic's count", TXN_TOPIC, state.num_partitions,
                        self.num_partitions)
            self.num_partitions = state.num_partitions

    def ensure_topic(self) -> None:
        """Create __transaction_state (compacted) on first use."""
        if self.topic_exists():
            self.sync_partition_count()
            return
        cfg = self.config
        configs = {
            "cleanup.policy": "compact", "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(cfg.get_int_or("transaction.state.log.min.isr", 1)),
            "segment.bytes": str(cfg.get_int_or("transaction.state.log.segment.bytes",
                                                DEFAULT_SEGMENT_BYTES)),
        }
        self.topic_admin.auto_create(TXN_TOPIC, self.num_partitions, configs)
        log.info("created the transaction state topic %s with %d partitions", TXN_TOPIC,
                 self.num_partitions)

    # ---- writes -----------------------------------------------------------------------------
    async def write(self, transactional_id: str, coordinator_epoch: int,
                    new: TxnTransit) -> ErrorCode:
        """Append `new` to the id's partition and wait until it is committed (acks=all).
        The errors are Kafka's (appendTransactionToLog): COORDINATOR_NOT_AVAILABLE when the
        write may be retried here, NOT_COORDINATOR when another broker leads now."""
        if not self.owns(transactional_id, coordinator_epoch):
            return ErrorCode.NOT_COORDINATOR
        p = self.partition_for(transactional_id)
        builder = RecordBatchBuilder()
        builder.append(self.now_ms(), txn_key(transactional_id), txn_value(new))
        result = self.replica_manager.append(
            TXN_TOPIC, p, memoryview(bytearray(builder.build())), produce_version=9, acks=-1)
        code = result.error
        if code == ErrorCode.NONE and result.required_high_watermark >= 0:
            purgatory = self.replica_manager.produce_purgatory
            op = purgatory.watch({(TXN_TOPIC, p): result.required_high_watermark})
            failed = await purgatory.wait_for(op, WRITE_TIMEOUT_S)
            code = failed.get((TXN_TOPIC, p), ErrorCode.NONE)
        if code != ErrorCode.NONE:
            log.warning("cannot write transactional id %s (%s) to %s-%d: %s",
                        transactional_id, new.state.kafka_name, TXN_TOPIC, p,
                        result.message or code.name)
            return _append_error(code)
        if not self.owns(transactional_id, coordinator_epoch):
            return ErrorCode.NOT_COORDINATOR  # the leadership moved meanwhile
        return ErrorCode.NONE

    # ---- loading ------------------------------------------------------------------------
    async def load_partition(self, p: int) -> list[TxnMetadata]:
        """Replay partition p into the cache; returns its transactions in PrepareCommit /
        PrepareAbort (their markers must be written again)."""
        part = self.partitions.get_partition(TXN_TOPIC, p)
        self.loading.add(p)
        try:
            if part is None:
                return []
            self.coordinator_epochs[p] = part.leader_epoch
            entries = await asyncio.to_thread(_read_partition, part.log)
            loaded: dict[str, TxnMetadata] = {}
            for e in entries:
                if e.value is None:
                    loaded.pop(e.transactional_id, None)
                    continue
                try:
                    loaded[e.transactional_id] = metadata_from_value(e.transactional_id,
                                                                     e.value)
                except (KeyError, ValueError) as exc:
                    log.warning("skipping transactional id %r of %s-%d: %s",
                                e.transactional_id, TXN_TOPIC, p, exc)
            for txn_id in [t for t in self.txns if self.partition_for(t) == p]:
                del self.txns[txn_id]
            self.txns.update(loaded)
        finally:
            self.loading.discard(p)
        pending = [t for t in loaded.values()
                   if t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]
        log.info("loaded %s-%d: %d record(s), %d transactional id(s), %d to complete",
                 TXN_TOPIC, p, len(entries), len(loaded), len(pending))
        return pending

    def unload_partition(self, p: int) -> list[TxnMetadata]:
        gone = [t for tid, t in self.txns.items() if self.partition_for(tid) == p]
        for t in gone:
            del self.txns[t.transactional_id]
        self.coordinator_epochs.pop(p, None)
        return gone

    def in_partition(self, p: int) -> list[TxnMetadata]:
        return [t for tid, t in self.txns.items() if self.partition_for(tid) == p]


def _append_error(code: ErrorCode) -> ErrorCode:
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


def _read_partition(partition_log: Any) -> list[LoadedTxn]:
    """Every readable record of one partition, in order; what cannot be read is logged and
    skipped (as Kafka's loader does)."""
    out: list[LoadedTxn] = []
    try:
        for batch in partition_log.iter_batches():
            legacy = batch.magic < 2  # Kafka never wrote these here, but loads them
            if not legacy and batch.is_control:
                continue
            try:
                records = list(batch)
            except Exception as e:  # CRC-valid bytes that are not records
                log.warning("skipping unreadable batch at offsets %s..%d of %s: %s",
                            "?" if legacy else batch.base_offset, batch.last_offset,
                            TXN_TOPIC, e)
                continue
            for rec in records:
                if rec.key is None:
                    continue
                try:
                    out.append(decode_txn_record(rec.key, rec.value))
                except Exception as e:  # one bad record must not stop the load
                    log.warning("skipping unreadable record at offset %d of %s: %s",
                                rec.offset, TXN_TOPIC, e)
    except Exception as e:  # a batch header that cannot be framed: nothing after it
        log.error("stopped loading a %s partition after %d record(s): %s", TXN_TOPIC,
                  len(out), e)
    return out


def partitions_by_topic(tps: set[TopicPartition] | frozenset[TopicPartition]
                        ) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in sorted(tps):
        out.setdefault(topic, []).append(p)
    return out
