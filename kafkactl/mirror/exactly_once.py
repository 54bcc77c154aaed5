"""ExactlyOnceStream: `kafkactl mirror --exactly-once`, KIP-447's consume-transform-produce.

Each stream has a transactional producer of its own, with a stable transactional.id
(`<group>-mirror-<stream>`, or `<prefix>-<stream>` with -X transactional.id=<prefix> in
the producer properties): a restarted stream fences the killed one and its open transaction
is aborted before the new one reads a record. The stream reads the source with
read_committed (unless isolation.level says otherwise) as a member of the group in the
source cluster, which assigns the partitions; it sends what it read in the open
transaction and, every commit interval and before its partitions are revoked, commits the
consumed offsets in the same transaction (AddOffsetsToTxn + TxnOffsetCommit). A transaction
spans one cluster, so those offsets are the group's offsets in the TARGET cluster (under
the same group id, without membership there: the transactional.id fences zombies) and a
stream starts each partition it is assigned from there (OffsetFetch require_stable); the
source cluster's committed offsets are left alone. The target's records and the offsets
become visible together or not at all; a transaction that fails is aborted and the stream
rewinds to the offsets of the last commit, so a killed or failed mirror neither loses nor
duplicates a record, as seen by a read_committed consumer of the target.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kafkactl.client.fetcher import PartitionFetch
from kafkactl.client.group import GroupAdmin, GroupConsumer
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from kafkactl.client.transaction_manager import (
    GroupMetadata,
    ProducerFencedError,
    TransactionError,
)
from kafkactl.mirror.config import MirrorConfig, consumer_kwargs, producer_kwargs
from kafkactl.mirror.progress import PartitionProgress
from kafkactl.mirror.stream import COPY_MIN_RECORDS, MirrorStream, is_transient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, error_for
from kafkactl.record.batch import RecordBatch, TimestampType
from kafkactl.record.codecs import decompress

log = logging.getLogger("kafkactl.mirror")

TopicPartition = tuple[str, int]
STABLE_WAIT = 60.0  # seconds to wait for another member's transaction to end


def transactional_id(config: MirrorConfig, stream: int) -> str:
    prefix = config.producer_properties.get("transactional.id") or f"{config.group}-mirror"
    return f"{prefix}-{config.stream_base + stream}"


class ExactlyOnceStream(MirrorStream):
    """One group member copying its partitions in transactions (see the module doc)."""

    def __init__(self, *args: Any, on_committed: Callable[[dict[str, int]], None],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_committed = on_committed
        self.in_txn = False
        self.txn_positions: dict[TopicPartition, int] = {}  # after what the txn holds
        self.txn_counts: dict[str, int] = {}  # records per source topic in the txn
        self.committed_positions: dict[TopicPartition, int] = {}
        self.offsets_admin: GroupAdmin | None = None  # the group's offsets in the target

    # ---- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.producer = self._new_producer()
            # fence the stream's previous incarnation (its open transaction is aborted)
            # before reading anything
            self.producer.init_transactions()
            self.offsets_admin = GroupAdmin(KafkaClient(
                self.config.target, client_id=f"kafkactl-mirror-{self.index}",
                security=self.config.target_security()))
            self.consumer = self._new_consumer()
            while not self.stop.is_set():
                try:
                    self._step()
                except ProducerFencedError:
                    raise
                except Exception as e:
                    if not is_transient(e) and not isinstance(e, TransactionError):
                        raise
                    log.warning("stream %d: %s; aborting the transaction and retrying",
                                self.index, e)
                    self._abort()
                    self.stop.wait(self.consumer.client.retry_backoff * 5)
        except Exception as e:
            self.on_error(e)
        finally:
            self._shutdown()

    def _new_producer(self) -> Producer:
        kwargs: dict[str, Any] = {"client_id": f"kafkactl-mirror-{self.index}",
                                  "linger_ms": 5, "batch_size": 262144}
        kwargs.update(producer_kwargs(self.config.producer_properties))
        kwargs["transactional_id"] = transactional_id(self.config, self.index)
        return Producer(self.config.target, **kwargs)

    def _new_consumer(self) -> GroupConsumer:
        kwargs: dict[str, Any] = {"auto_offset_reset": "earliest", "isolation_level": 1,
                                  "client_id": f"kafkactl-mirror-{self.index}"}
        kwargs.update(consumer_kwargs(self.config.consumer_properties))
        consumer = GroupConsumer(
            *self.config.topics, group_id=self.config.group,
            bootstrap_servers=self.config.source, pattern=self.config.whitelist,
            enable_auto_commit=False, on_assign=self._on_assign, on_revoke=self._on_revoke,
            **kwargs)
        consumer.subscribe(())
        return consumer

    def _shutdown(self) -> None:
        """Commit the open transaction, leave the group, close the producer."""
        consumer = self.consumer
        try:
            if consumer is not None and self.in_txn:
                self.commit()
        except Exception as e:  # aborted: the next owner reads it again
            log.warning("stream %d: final commit failed: %s", self.index, e)
            self._abort()
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:
                log.warning("stream %d: leaving the group failed: %s", self.index, e)
        producer = getattr(self, "producer", None)
        if producer is not None:
            producer.close(10.0)
        if self.offsets_admin is not None:
            self.offsets_admin.close()
            self.offsets_admin.client.close()

    # ---- rebalances ---------------------------------------------------------------------

    def _on_assign(self, tps: set[TopicPartition]) -> None:
        """Start each partition at its committed offset, waiting for another member's
        transaction that still has offsets pending for it (OffsetFetch require_stable)."""
        self.owned = set(tps)
        consumer = self.consumer
        if consumer is None or not tps:
            return
        for tp, offset in self._stable_committed(consumer, tps).items():
            if offset >= 0:
                consumer.seek(tp, offset)
                self.committed_positions[tp] = offset
                self.tracker.partitions[tp] = PartitionProgress(tp, offset)

    def _stable_committed(self, consumer: GroupConsumer,
                          tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        body = {"group_id": self.config.group, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}
        admin = self.offsets_admin
        assert admin is not None
        deadline = time.monotonic() + STABLE_WAIT
        while True:
            conn = admin.coordinator(self.config.group)
            version = min(conn.version_for(ApiKey.OFFSET_FETCH), 7)
            if version < 7:  # no require_stable: the plain committed offsets
                return admin.fetch_offsets(self.config.group, tps)
            resp = admin.request(self.config.group, ApiKey.OFFSET_FETCH, body, version=version)
            out: dict[TopicPartition, int] = {}
            unstable = False
            for t in resp.get("topics") or ():
                for p in t.get("partitions") or ():
                    code = p.get("error_code", 0)
                    if code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                        unstable = True
                    elif code:
                        raise error_for(code)(f"OffsetFetch {t['name']}-{p['partition_index']}")
                    out[(t["name"], p["partition_index"])] = p["committed_offset"]
            top = resp.get("error_code", 0)
            if top:
                raise error_for(top)(f"OffsetFetch for group {self.config.group!r}")
            if not unstable:
                return out
            if time.monotonic() >= deadline:
                raise error_for(ErrorCode.UNSTABLE_OFFSET_COMMIT)(
                    f"group {self.config.group!r}: a transaction kept offsets pending for "
                    f"{STABLE_WAIT:g} s")
            time.sleep(0.1)

    def _on_revoke(self, tps: set[TopicPartition]) -> None:
        """Before the partitions go to another member: commit what was copied from them
        (or abort, and the next owner reads it again)."""
        try:
            if self.in_txn:
                self.commit()
        except Exception as e:
            log.warning("stream %d: commit before rebalance failed: %s", self.index, e)
            self._abort()
        for tp in tps:
            self.committed_positions.pop(tp, None)
            self.txn_positions.pop(tp, None)
        self.tracker.forget(tps)
        self.owned -= tps

    # ---- transactions ---------------------------------------------------------------------

    def commit(self, tps: set[TopicPartition] | None = None) -> None:
        """Commit the open transaction with the offsets after what it copied."""
        consumer = self.consumer
        assert consumer is not None
        self._next_commit = time.monotonic() + self.config.commit_interval_ms / 1000
        if not self.in_txn:
            return
        offsets = {tp: off for tp, off in self.txn_positions.items() if tp in self.owned}
        if offsets:  # the group's offsets in the target cluster (no membership there)
            self.producer.send_offsets_to_transaction(offsets, GroupMetadata(self.config.group))
        self.producer.commit_transaction()
        self.in_txn = False
        self.committed_positions.update(offsets)
        for tp, off in offsets.items():
            self.tracker.partitions[tp] = PartitionProgress(tp, off)
        counts, self.txn_counts = self.txn_counts, {}
        self.txn_positions.clear()
        self.on_committed(counts)

    def _abort(self) -> None:
        """Abort the open transaction and read again from the last committed offsets."""
        producer = getattr(self, "producer", None)
        if self.in_txn and producer is not None:
            try:
                producer.abort_transaction(30.0)
            except ProducerFencedError:
                raise
            except Exception as e:
                log.warning("stream %d: abort failed: %s", self.index, e)
        self.in_txn = False
        self.txn_counts = {}
        self.txn_positions.clear()
        consumer = self.consumer
        if consumer is not None:
            for tp, off in self.committed_positions.items():
                if tp in self.owned:
                    consumer.seek(tp, off)

    def _begin(self) -> None:
        if not self.in_txn:
            self.producer.begin_transaction()
            self.in_txn = True

    # ---- copying ------------------------------------------------------------------------

    def _copy(self, pf: PartitionFetch) -> None:
        consumer = self.consumer
        assert consumer is not None
        tp = (pf.topic, pf.partition)
        if tp not in self.owned:
            return
        nxt = pf.next_offset()
        # where this member started reading a partition nobody committed yet: an abort
        # rewinds there
        self.committed_positions.setdefault(tp, pf.fetch_offset)
        source_topic = consumer.client.cluster.topics.get(pf.topic)
        n_source = len(source_topic.partitions) if source_topic is not None else 0
        target = self.topics.get(pf.topic, n_source or pf.partition + 1)
        partition = pf.partition if target.keep_partition else None
        self._begin()
        try:
            sent = (self._copy_whole(pf, target.name) if partition is not None else None)
            if sent is None:
                sent = 0
                for rec in pf.records_iter(consumer.check_crcs):
                    self.producer.send(
                        target.name, None if rec.value is None else bytes(rec.value),
                        None if rec.key is None else bytes(rec.key), partition=partition,
                        headers=[(k, None if v is None else bytes(v)) for k, v in rec.headers],
                        timestamp_ms=rec.timestamp)
                    sent += 1
        except Exception:
            # part of the chunk went into the transaction: it can only abort
            self.producer.transactions.fail(  # type: ignore[union-attr]
                TransactionError(f"copying {pf.topic}-{pf.partition} failed"))
            raise
        self.txn_positions[tp] = nxt
        if sent:
            self.txn_counts[pf.topic] = self.txn_counts.get(pf.topic, 0) + sent

    def _copy_whole(self, pf: PartitionFetch, target: str) -> int | None:
        """The copy path (records sections byte for byte into the same partition), or None
        when a batch needs its records decoded."""
        batches = list(pf.batches())
        if not batches or sum(b.record_count for b in batches) < COPY_MIN_RECORDS:
            return None
        for b in batches:
            if (not isinstance(b, RecordBatch) or b.base_offset < pf.fetch_offset
                    or b.timestamp_type != TimestampType.CREATE_TIME
                    or b.last_offset_delta != b.record_count - 1
                    or b.size + 100 > self.producer.max_request_size
                    or (self.consumer is not None and self.consumer.check_crcs
                        and not b.is_valid())):
                return None
        sent = 0
        for b in batches:
            section = b.records_section()
            codec = b.attributes & 0x07
            data = decompress(codec, section) if codec else bytes(section)
            self.producer.send_records_section(target, pf.partition, data, b.record_count,
                                               b.first_timestamp, b.max_timestamp)
            sent += b.record_count
        return sent
