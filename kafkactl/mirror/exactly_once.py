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
the same group id, without membership there: the transactional.id fences zombies), each
kept under the partition of the same number of the topic it is copied to (a renamed one
too; a target topic with fewer partitions than its source stops the mirror, naming it), and a
stream starts each partition it is assigned from there (OffsetFetch require_stable); the
source cluster's committed offsets are left alone. The target's records and the offsets
become visible together or not at all; a transaction that fails is aborted and the stream
rewinds to the offsets of the last commit, so a killed or failed mirror neither loses nor
duplicates a record, as seen by a read_committed consumer of the target.

The group's membership is in the source cluster, its offsets in the target: the target's
coordinator cannot fence a zombie by its generation (KIP-447's check of TxnOffsetCommit),
so the stream does: once the offsets are in the transaction and before it commits, it asks
the source's coordinator whether it still holds its generation (a Heartbeat), and aborts
when it does not (expelled, or left after max.poll.interval.ms), as it aborts when its
partitions are lost. A new owner reads the offsets with require_stable, so it waits for a
transaction whose offsets were sent before it got the partitions.

A record the target refuses for good (too large, invalid, a topic it may not write...)
fails the whole transaction, and the producer does not always say which record it was (a
batch refused as too large is split, and a transaction cannot go on past that). So a
transaction that failed is aborted and its records are copied again one per target batch
("carefully", each target partition added to the transaction on its own first), which
names the refused record: the stream then stops at it, after committing the records
before it with their offsets (the mirror fails naming it), or, with
--no-abort-on-send-failure, leaves it out of the transaction, redone without it, and counts
it as skipped once that transaction commits. Retriable failures are retried as before;
a fenced producer ends the stream.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafkactl.client.errors import PRODUCE_RETRIABLE, RecordTooLargeError
from kafkactl.client.fetcher import ConsumerRecord, PartitionFetch
from kafkactl.client.group import CommitFailedError, GroupAdmin, GroupConsumer
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.client.transaction_manager import (
    GroupMetadata,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionError,
    TransactionManager,
)
from kafkactl.mirror.config import (
    MirrorConfig,
    MirrorConfigError,
    consumer_kwargs,
    producer_kwargs,
)
from kafkactl.mirror.progress import PartitionProgress
from kafkactl.mirror.retry import ExponentialBackoff
from kafkactl.mirror.stream import (
    COPY_MIN_RECORDS,
    MirrorStream,
    SendFailure,
    copy_sections,
    is_fenced,
    is_transient,
    refusal_text,
)
from kafkactl.mirror.target_outage import TargetOutage
from kafkactl.mirror.topics import TargetTopic
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for
from kafkactl.record.batch import RecordBatch, TimestampType, encode_record

log = logging.getLogger("kafkactl.mirror")

TopicPartition = tuple[str, int]
STABLE_WAIT = 60.0  # seconds to wait for another member's transaction to end
# Produce answers about the producer or its transaction, not the record: the transaction
# is aborted and redone (a fenced producer ends the stream)
PRODUCER_STATE = frozenset({
    ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.TRANSACTION_ABORTABLE})
# A record the target refused: source partition, offset, target topic, the error
Refusal = tuple[TopicPartition, int, str, str]


def is_refusal(error: BaseException | None) -> bool:
    """The broker's answer refuses a record for good (MESSAGE_TOO_LARGE, INVALID_RECORD,
    CORRUPT_MESSAGE, TOPIC_AUTHORIZATION_FAILED, ...): a Kafka error the producer does not
    retry and that is not about the producer's own state."""
    return (isinstance(error, KafkaError) and error.code not in PRODUCE_RETRIABLE
            and error.code not in PRODUCER_STATE)


def _headers(rec: ConsumerRecord) -> list[tuple[str, bytes | None]]:
    return [(k, None if v is None else bytes(v)) for k, v in rec.headers]


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


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
        # records the target refused for good: with --no-abort-on-send-failure left out of
        # every transaction (offset -> target topic, error), counted once one commits past
        # them; else the stream stops at the first one of a partition (`stop_at`) and
        # reports `failure` once what is before it is committed
        self.skips: dict[TopicPartition, dict[int, tuple[str, str]]] = {}
        self.txn_skipped: list[tuple[TopicPartition, int]] = []  # in the open txn
        self.stop_at: dict[TopicPartition, int] = {}
        self.failure: SendFailure | None = None
        # records before these offsets are copied carefully: one per target batch, so the
        # producer's answer names a refused one (a failed transaction's records)
        self.careful: dict[TopicPartition, int] = {}
        # the open transaction's number (in the entries of its careful batches), what the
        # producer refused of it and whether a batch of it failed (its sender thread)
        self._batch_lock = threading.Lock()
        self._txn_number = 0
        self._refusals: list[Refusal] = []
        self._batch_error: BaseException | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.producer = self._new_producer()
            self.producer.add_batch_callback(self._on_batch)
            self.outage = TargetOutage(self.producer)
            # fence the stream's previous incarnation (its open transaction is aborted)
            # before reading anything
            self.producer.init_transactions()
            self.offsets_admin = GroupAdmin(KafkaClient(
                self.config.target, client_id=self.client_id(self.config.producer_properties),
                security=self.config.target_security()))
            self.consumer = self._new_consumer()
            # waits between retries grow as Kafka's clients' (100 ms doubling to 1 s)
            backoff = ExponentialBackoff(self.consumer.client.retry_backoff)
            failures = 0  # in a row
            while not self.stop.is_set():
                try:
                    self._step()
                    failures = 0
                except ProducerFencedError:
                    raise
                except Exception as e:
                    if not is_transient(e) and not isinstance(e, TransactionError):
                        raise
                    if self.outage is not None:
                        self.outage.failed(e)  # (said once, reminded: not every retry)
                    if not self._recover(e):
                        self.stop.wait(backoff.backoff(failures))
                        failures += 1
        except Exception as e:
            self.fenced = is_fenced(e)
            self.on_error(e)
        finally:
            self._shutdown()

    def _recover(self, error: BaseException) -> bool:
        """Abort the failed transaction and rewind. A record the producer refused for good
        is then skipped or stopped at (`_refuse`); records of a transaction that failed
        otherwise are copied again carefully (which names a refused record among them).
        True when the stream goes on at once, False when it waits before retrying."""
        sent = dict(self.txn_positions)
        self._abort()  # (flushed: every batch of the transaction has had its answer)
        with self._batch_lock:
            refusals, self._refusals = self._refusals, []
        if refusals:
            first: dict[TopicPartition, Refusal] = {}
            for r in refusals:  # a partition's first one (later ones may follow from it)
                if r[0] not in first or r[1] < first[r[0]][1]:
                    first[r[0]] = r
            for tp, offset, target, why in first.values():
                self._refuse(tp, offset, target, why)
            return True
        careful = False
        if isinstance(error, TransactionError):
            for tp, offset in sent.items():
                if offset > self.careful.get(tp, -1):
                    self.careful[tp] = offset
                    careful = True
        if self.outage is None or not self.outage.unreachable():
            log.warning("stream %d: %s; aborting the transaction and %s", self.index, error,
                        "copying its records again one per batch" if careful else "retrying")
        return careful

    def _refuse(self, tp: TopicPartition, offset: int, target: str, error: str) -> None:
        """The target refused the record at `offset` of `tp` for good: stop there (abort
        on send failure) or leave it out (skip)."""
        if self.config.abort_on_send_failure:
            if offset < self.stop_at.get(tp, offset + 1):
                self.stop_at[tp] = offset
            failure = self.failure
            # the one reported is where the stream stops: an earlier refusal of the same
            # partition (found by a later, careful copy) replaces it
            if failure is None or ((failure.topic, failure.partition) == tp
                                   and offset < failure.offset):
                self.failure = SendFailure(tp[0], tp[1], offset, target, error)
        else:
            self.skips.setdefault(tp, {})[offset] = (target, error)

    def _on_batch(self, batch: ProducerBatch, base_offset: int,
                  error: BaseException | None) -> None:
        """The producer's verdict on a batch (its sender thread): a failed one keeps its
        transaction from committing; a careful one refused names its record."""
        if error is None:
            return
        entries = batch.entries
        with self._batch_lock:
            if self._batch_error is None:
                self._batch_error = error
            if entries and is_refusal(error) and entries[0][0] == self._txn_number:
                _number, tp, offset, target = entries[0]
                self._refusals.append((tp, offset, target, _described(error)))

    def _step(self) -> None:
        super()._step()
        if self.failure is not None and self._at_failure():
            # everything before the refused record is in the transaction: commit it, stop
            self.commit()
            failure, self.failure = self.failure, None
            self.on_failure(failure)

    def _at_failure(self) -> bool:
        """Whether the open transaction reaches each refused record stopped at (of the
        partitions still owned)."""
        for tp, offset in self.stop_at.items():
            if tp in self.owned and self.txn_positions.get(
                    tp, self.committed_positions.get(tp, offset)) < offset:
                return False
        return True

    def _fetched(self, fetches: list[PartitionFetch]) -> None:
        """Where the stream started reading each partition nobody committed yet: an abort
        rewinds there (noted before copying: a failure mid-poll drops the rest)."""
        for pf in fetches:
            tp = (pf.topic, pf.partition)
            if tp in self.owned:
                self.committed_positions.setdefault(tp, pf.fetch_offset)

    def _new_producer(self) -> Producer:
        # each stream's producer has a client.id of its own (so has each worker process's)
        # as it has a transactional.id of its own
        kwargs: dict[str, Any] = {"linger_ms": 5, "batch_size": 262144}
        kwargs.update(producer_kwargs(self.config.producer_properties))
        kwargs["client_id"] = self.client_id(self.config.producer_properties)
        kwargs["transactional_id"] = transactional_id(self.config, self.index)
        return Producer(self.config.target, **kwargs)

    def _new_consumer(self) -> GroupConsumer:
        kwargs: dict[str, Any] = {"auto_offset_reset": "earliest", "isolation_level": 1}
        kwargs.update(consumer_kwargs(self.config.consumer_properties))
        kwargs["client_id"] = self.client_id(self.config.consumer_properties)
        consumer = GroupConsumer(
            *self.config.topics, group_id=self.config.group,
            bootstrap_servers=self.config.source, pattern=self.config.whitelist,
            enable_auto_commit=False, on_assign=self._on_assign, on_revoke=self._on_revoke,
            on_lost=self._on_lost, **kwargs)
        consumer.subscribe(())
        return consumer

    def _shutdown(self) -> None:
        """Commit the open transaction (abort it when the stream's group member was
        fenced: its partitions are another member's), leave the group, close the
        producer."""
        consumer = self.consumer
        down = self.outage is not None and self.outage.unreachable()
        try:
            if consumer is not None and down:
                # neither a commit nor an abort can reach the target: a transaction open
                # there stays so until the next run's InitProducerId aborts it (or its
                # timeout does); nothing of it is visible to read_committed readers, and
                # the offsets in it are not committed: the next run copies it again
                self.on_error(ConnectionError(
                    f"stream {self.index} stopped with what it read since its last commit "
                    f"not committed ({self.outage.where() if self.outage else 'the target'}"
                    " did not answer); the next run aborts an open transaction and copies "
                    "those records again"))
            elif consumer is not None and self.in_txn:
                if self.fenced:
                    self._abort()
                else:
                    self.commit()  # (only records before a refused one stopped at)
        except Exception as e:  # aborted: the next owner reads it again
            log.warning("stream %d: final commit failed: %s", self.index, e)
            with contextlib.suppress(ProducerFencedError):  # (its successor aborted it)
                self._abort()
        if self.failure is not None:  # stopped before reaching it: still the mirror's end
            failure, self.failure = self.failure, None
            self.on_failure(failure)
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:
                log.warning("stream %d: leaving the group failed: %s", self.index, e)
        producer = getattr(self, "producer", None)
        if producer is not None:
            if down:
                producer.abort()
            else:
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
        for tp in sorted(tps):  # before anything is read: a partition with nowhere to keep
            source = consumer.client.cluster.topics.get(tp[0])  # its offset stops it now
            self._target_with_room(tp, len(source.partitions) if source is not None else 0)
        for tp, offset in self._stable_committed(consumer, tps).items():
            if offset >= 0:
                consumer.seek(tp, offset)
                self.committed_positions[tp] = offset
                self.tracker.partitions[tp] = PartitionProgress(tp, offset)

    def _offsets_key(self, tp: TopicPartition) -> TopicPartition:
        """Where a source partition's offset is kept in the target cluster: the partition of
        the same number of the topic it is copied to (a group's offsets must name a
        partition the cluster has: the source topic's own name is not there when renamed)."""
        return self.config.target_topic(tp[0]), tp[1]

    def _stable_committed(self, consumer: GroupConsumer,
                          tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offset of each of `tps` (source partitions), kept under
        _offsets_key in the target cluster."""
        source_of = {self._offsets_key(tp): tp for tp in tps}
        return {source_of[tp]: off for tp, off in
                self._stable_committed_keys(set(source_of)).items() if tp in source_of}

    def _stable_committed_keys(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
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
        self._forget(tps)

    def _on_lost(self, tps: set[TopicPartition]) -> None:
        """The stream is no longer in the group (KIP-447 would fence it): its open
        transaction aborts, nothing of `tps` is committed; another member may own them."""
        if self.in_txn:
            log.warning("stream %d: no longer in the group: aborting the open transaction",
                        self.index)
            self._abort()
        self._forget(tps)

    def _forget(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self.committed_positions.pop(tp, None)
            self.txn_positions.pop(tp, None)
            self.skips.pop(tp, None)  # the next owner finds them again
            self.careful.pop(tp, None)
        self.tracker.forget(tps)
        self.owned -= tps

    # ---- transactions ---------------------------------------------------------------------

    def commit(self, tps: set[TopicPartition] | None = None, *, settled: bool = False) -> None:
        """Commit the open transaction with the offsets after what it copied, if every
        batch of it was acknowledged (else TransactionAbortableError: abort it)."""
        consumer = self.consumer
        assert consumer is not None
        self._next_commit = time.monotonic() + self.config.commit_interval_ms / 1000
        if not self.in_txn:
            return
        offsets = {tp: off for tp, off in self.txn_positions.items() if tp in self.owned}
        if offsets:  # the group's offsets in the target cluster (no membership there)
            self.producer.send_offsets_to_transaction(
                {self._offsets_key(tp): off for tp, off in offsets.items()},
                GroupMetadata(self.config.group))
        self.producer.flush()
        with self._batch_lock:
            failed = self._batch_error
        if failed is not None and self._txn().error is None:
            # (a batch that expired, say, does not fail the transaction by itself)
            raise TransactionAbortableError(f"a batch of the transaction failed: {failed}")
        if not consumer.check_membership():  # (the fencing KIP-447 does; see above)
            raise CommitFailedError(
                f"stream {self.index}: no longer in group {self.config.group!r} (expelled, "
                "or it left after max.poll.interval.ms): the transaction is aborted and "
                "its records copied again by the partitions' owner")
        self.producer.commit_transaction()
        if self.outage is not None:
            self.outage.reached()
        self.in_txn = False
        self.committed_positions.update(offsets)
        for tp, off in offsets.items():
            self.tracker.partitions[tp] = PartitionProgress(tp, off)
            if self.careful.get(tp, off + 1) <= off:
                del self.careful[tp]
        counts, self.txn_counts = self.txn_counts, {}
        self.txn_positions.clear()
        skipped, self.txn_skipped = self.txn_skipped, []
        for tp, offset in skipped:
            if tp in offsets:
                _target, why = self.skips.get(tp, {}).pop(offset, ("", "refused"))
                log.warning("skipped offset %d of %s-%d: %s", offset, tp[0], tp[1], why)
                self.on_skip(tp[0], 1)
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
                if self.outage is None or not self.outage.failed(e):
                    log.warning("stream %d: abort failed: %s", self.index, e)
        self.in_txn = False
        self.txn_counts = {}
        self.txn_positions.clear()
        self.txn_skipped = []
        consumer = self.consumer
        if consumer is not None:
            for tp, off in self.committed_positions.items():
                if tp in self.owned:
                    consumer.seek(tp, off)

    def _begin(self) -> None:
        if not self.in_txn:
            with self._batch_lock:
                self._txn_number += 1
                self._refusals = []
                self._batch_error = None
            self.producer.begin_transaction()
            self.in_txn = True

    # ---- copying ------------------------------------------------------------------------

    def _copy(self, pf: PartitionFetch) -> None:
        consumer = self.consumer
        assert consumer is not None
        tp = (pf.topic, pf.partition)
        if tp not in self.owned:
            return
        start, nxt = pf.fetch_offset, pf.next_offset()
        self.committed_positions.setdefault(tp, start)
        stop = self.stop_at.get(tp)
        end = nxt if stop is None else min(nxt, stop)  # nothing from a refused record on
        if end <= start:
            return
        source_topic = consumer.client.cluster.topics.get(pf.topic)
        n_source = len(source_topic.partitions) if source_topic is not None else 0
        target = self._target_with_room(tp, n_source)
        partition = pf.partition if target.keep_partition else None
        skips = self.skips.get(tp) or {}
        self._begin()
        try:
            if start < self.careful.get(tp, -1):
                end, sent = self._copy_careful(pf, target.name, partition, end, skips)
            else:
                whole = None
                if (partition is not None and end == nxt
                        and not any(start <= offset < nxt for offset in skips)):
                    whole = self._copy_whole(pf, target.name)
                if whole is None:
                    end, sent = self._copy_records(pf, target.name, partition, end, skips)
                else:
                    sent = whole
        except Exception:
            # part of the chunk went into the transaction: it can only abort
            self._txn().fail(TransactionError(f"copying {pf.topic}-{pf.partition} failed"))
            raise
        self.txn_positions[tp] = end
        if sent:
            self.txn_counts[pf.topic] = self.txn_counts.get(pf.topic, 0) + sent

    def _target_with_room(self, tp: TopicPartition, n_source: int) -> TargetTopic:
        """The target topic of source partition `tp` (made if missing), which must have a
        partition of its number: its offset is kept there (MirrorConfigError naming the
        fix otherwise)."""
        target = self.topics.get(tp[0], n_source or tp[1] + 1)
        if tp[1] >= target.partitions:
            raise MirrorConfigError(
                f"--exactly-once keeps the offset of source partition {tp[0]}-{tp[1]} under "
                f"partition {tp[1]} of the target topic {target.name}, which has "
                f"{target.partitions} partition(s): add partitions to it (kafkactl topics "
                f"alter -t {target.name} --partitions {max(n_source, tp[1] + 1)}) or mirror "
                "without --exactly-once")
        return target

    def _txn(self) -> TransactionManager:
        txn = self.producer.transactions
        assert txn is not None
        return txn

    def _records_to_copy(self, pf: PartitionFetch, end: int,
                         skips: dict[int, tuple[str, str]]) -> Iterator[ConsumerRecord]:
        """The chunk's records before `end`; one to skip is noted in the transaction's
        skips instead."""
        assert self.consumer is not None
        tp = (pf.topic, pf.partition)
        for rec in pf.records_iter(self.consumer.check_crcs):
            if rec.offset >= end:
                return
            if rec.offset in skips:
                self.txn_skipped.append((tp, rec.offset))
                continue
            yield rec

    def _copy_records(self, pf: PartitionFetch, target: str, partition: int | None,
                      end: int, skips: dict[int, tuple[str, str]]) -> tuple[int, int]:
        """The chunk's records before `end` one by one, without the ones to skip; returns
        the offset copied up to (a record refused before sending may stop it) and how many
        records were sent."""
        tp = (pf.topic, pf.partition)
        send = self.producer.send
        sent = 0
        for rec in self._records_to_copy(pf, end, skips):
            try:
                send(target, None if rec.value is None else bytes(rec.value),
                     None if rec.key is None else bytes(rec.key), partition=partition,
                     headers=_headers(rec), timestamp_ms=rec.timestamp)
            except RecordTooLargeError as e:  # refused before sending: the txn is intact
                if self._refused_before_sending(tp, rec.offset, target, e):
                    return rec.offset, sent
                continue
            sent += 1
        return end, sent

    def _copy_careful(self, pf: PartitionFetch, target: str, partition: int | None,
                      end: int, skips: dict[int, tuple[str, str]]) -> tuple[int, int]:
        """As _copy_records, but each record a target batch of its own whose entry names
        it (the producer's answer to a refused one says which record it was), and a
        target partition new to the transaction added on its own first (a refusal of the
        partition, such as topic authorization, names the record too). Raises the
        transaction's error as soon as it has one."""
        tp = (pf.topic, pf.partition)
        producer = self.producer
        txn = self._txn()
        n_partitions = 0
        sent = 0
        for rec in self._records_to_copy(pf, end, skips):
            offset = rec.offset
            key = None if rec.key is None else bytes(rec.key)
            value = None if rec.value is None else bytes(rec.value)
            p = partition
            if p is None:
                n_partitions = n_partitions or len(producer.partitions_for(target))
                p = producer.partitioner.partition(target, key, n_partitions)
            refused: BaseException | None = None
            with txn.lock:  # (the sender fails the transaction under it)
                error = txn.error  # a batch refused already: the txn is done
                if error is None and (target, p) not in txn.partitions:
                    try:
                        txn.add_partitions([(target, p)])
                    except TransactionAbortableError as e:  # the refusal of this record?
                        error, refused = e, e.__cause__
            if error is not None:
                if refused is not None and is_refusal(refused):
                    with self._batch_lock:
                        self._refusals.append((tp, offset, target, _described(refused)))
                raise error
            section = encode_record(0, 0, key, value, _headers(rec))
            try:
                producer.send_records_section(target, p, section, 1, rec.timestamp,
                                              rec.timestamp,
                                              entries=[(self._txn_number, tp, offset, target)])
            except RecordTooLargeError as e:
                if self._refused_before_sending(tp, offset, target, e):
                    return offset, sent
                continue
            sent += 1
        return end, sent

    def _refused_before_sending(self, tp: TopicPartition, offset: int, target: str,
                                error: RecordTooLargeError) -> bool:
        """A record too large for the producer itself (max.request.size): nothing of it was
        sent, so the transaction goes on; True when the stream stops at it."""
        self._refuse(tp, offset, target,
                     refusal_text(error, self.config.abort_on_send_failure))
        if self.config.abort_on_send_failure:
            return True
        self.txn_skipped.append((tp, offset))
        return False

    def _copy_whole(self, pf: PartitionFetch, target: str) -> int | None:
        """The copy path (records sections byte for byte into the same partition), or None
        when a batch needs its records decoded, or is too large to send as one batch
        uncompressed (copy_sections)."""
        batches = list(pf.batches())
        if not batches or sum(b.record_count for b in batches) < COPY_MIN_RECORDS:
            return None
        for b in batches:
            if (not isinstance(b, RecordBatch) or b.base_offset < pf.fetch_offset
                    or pf.cuts(b) or b.timestamp_type != TimestampType.CREATE_TIME
                    or b.last_offset_delta != b.record_count - 1
                    or b.size + 100 > self.producer.max_request_size
                    or (self.consumer is not None and self.consumer.check_crcs
                        and not b.is_valid())):
                return None
        sections = copy_sections(self.producer, batches)
        if sections is None:
            return None
        sent = 0
        for b, data in zip(batches, sections, strict=True):
            self.producer.send_records_section(target, pf.partition, data, b.record_count,
                                               b.first_timestamp, b.max_timestamp)
            sent += b.record_count
        return sent
