"""Sender: the producer's I/O thread. Drains ready batches to partition leaders, handles
responses, retries without reordering, and keeps the idempotent producer state. With a
TransactionManager (a transactional.id), it adds each partition to the ongoing transaction
(AddPartitionsToTxn) before draining the partition's first batch of it, marks the batches
transactional, and once the transaction cannot commit fails what is still queued."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkactl.client.accumulator import RecordAccumulator, TopicPartition
from kafkactl.client.errors import (
    PRODUCE_REFRESH_METADATA,
    PRODUCE_RETRIABLE,
    AuthenticationFailedError,
    ClosedBeforeDelivery,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    RecordTooLargeError,
    UnknownTopicError,
)
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, error_for, error_name

if TYPE_CHECKING:  # imported by a transactional producer only
    from kafkactl.client.transaction_manager import TransactionManager

# A broker closes the connection of a request larger than its socket.request.max.bytes
# (Kafka's default: the client cannot ask for the brokers' own) without an answer; so
# several batches go in one Produce request only up to it, less MULTI_BATCH_MARGIN (what
# the request adds to them), and a request that may exceed it (its batches, each with
# its topic's name and BATCH_OVERHEAD, and PRODUCE_OVERHEAD: one batch, then) is not sent
# again when the connection breaks under it
SOCKET_REQUEST_MAX_BYTES = 104857600
MULTI_BATCH_MARGIN = 65536
PRODUCE_OVERHEAD = 64
BATCH_OVERHEAD = 16


def _log_exception(message: str) -> None:
    """Log the exception being handled (logging is imported then: a run without one never
    loads it)."""
    import logging

    logging.getLogger("kafkactl.producer").exception(message)


class ProducerState:
    """Idempotence: producer id/epoch and the next sequence per partition."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self.next_sequence: dict[TopicPartition, int] = defaultdict(int)
        # (producer id, epoch) of the last batch the broker acknowledged, per partition
        self.acked: dict[TopicPartition, tuple[int, int]] = {}

    def assign(self, batch: ProducerBatch) -> None:
        tp = (batch.topic, batch.partition)
        seq = self.next_sequence[tp]
        batch.set_producer_state(self.producer_id, self.epoch, seq)
        self.next_sequence[tp] = (seq + batch.record_count) & 0x7FFFFFFF


class Sender(threading.Thread):
    def __init__(self, client: KafkaClient, accumulator: RecordAccumulator, *,
                 acks: int = -1, compression: int = 0, idempotent: bool = True,
                 retries: int = 2147483647, retry_backoff_ms: int = 100,
                 delivery_timeout_ms: int = 120000, request_timeout_ms: int = 30000,
                 max_request_size: int = 1048576, max_in_flight: int = 5,
                 transactions: TransactionManager | None = None) -> None:
        super().__init__(name="kafkactl-producer-sender", daemon=True)
        self.txn = transactions
        self.client = client
        self.acc = accumulator
        self.acks = acks
        self.compression = compression
        self.idempotent = idempotent and acks == -1
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        # (more than one batch in a request: up to what every broker takes)
        self.request_size = min(max_request_size,
                                SOCKET_REQUEST_MAX_BYTES - MULTI_BATCH_MARGIN)
        # Without idempotence only one batch per partition may be in flight, or a retry
        # could overtake a later batch (reordering).
        self.max_in_flight_per_partition = max_in_flight if self.idempotent else 1
        self.state = ProducerState()
        self.in_flight: dict[TopicPartition, list[ProducerBatch]] = defaultdict(list)
        self.running = True
        self.force_close = False
        self.fatal_error: BaseException | None = None
        self.metadata_cond = threading.Condition()
        self.wanted_topics: set[str] = set()
        self.topic_errors: dict[str, BaseException] = {}
        self._need_metadata = False
        # told (in this thread) of each connection-level failure as it happens, before the
        # retry: (the broker's node id, -1 when no broker answered at all; the error)
        self.on_connection_error: Callable[[int, BaseException | None], None] | None = None
        # told (in this thread) when a metadata refresh finds a topic the producer has
        # records for does not exist (deleted while producing, with auto-create off)
        self.on_topic_error: Callable[[str, BaseException], None] | None = None
        # no queued batch was made before this (time.monotonic() s, as created_ms / 1000):
        # none expires while now - it <= delivery.timeout.ms (_expire_batches)
        self._earliest_created = float("-inf")

    # -- API for the producer's thread -------------------------------------------------------

    def wakeup(self) -> None:
        self.client.wakeup()

    def request_topic(self, topic: str) -> None:
        with self.metadata_cond:
            self.wanted_topics.add(topic)
            self.topic_errors.pop(topic, None)
            self._need_metadata = True
        self.wakeup()

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        while True:
            if not self.running and (self.force_close or not self.acc.has_pending()):
                break
            try:
                self.run_once()
            except (NoBrokersAvailable, AuthenticationFailedError) as e:
                self._on_no_brokers(e)
            except Exception as e:  # keep the thread alive; fail what cannot proceed
                _log_exception("producer sender error")
                self._on_no_brokers(e)
        self._fail_all(ClosedBeforeDelivery("the producer was closed before delivery"))
        self.client.close()

    def _on_no_brokers(self, e: BaseException) -> None:
        self._tell_connection_error(-1, e)
        with self.metadata_cond:
            for t in self.wanted_topics:
                self.topic_errors[t] = e
            self.metadata_cond.notify_all()
        self._expire_batches(time.monotonic())
        time.sleep(self.retry_backoff)

    def run_once(self) -> None:
        if self.fatal_error is not None:  # nothing is sent any more
            self._fail_all(self.fatal_error)
            self.client.poll(self.retry_backoff)
            return
        # (no metadata before a topic is asked for: the producer's first request for its
        # topic is the first Metadata, one round trip instead of two at start-up)
        # A topic asked for is looked up now; else at most once per retry.backoff.ms (a
        # partition with no leader, or a leader that is dead and not replaced yet, is
        # looked up again at that pace, never in a busy loop).
        # ... and every metadata.max.age.ms (Java's periodic refresh: partitions added to
        # a topic get records, new leaders are learnt before a request fails)
        if (self._need_metadata or (self.client.cluster.stale and self.acc.batches)
                or self._metadata_aged()) and \
                (self._new_topic_wanted() or self.client.metadata_backoff() <= 0):
            self._update_metadata()
        if (self.txn is None and self.idempotent and self.state.producer_id < 0
                and self.acc.has_pending()):
            self._init_producer_id()
        now = time.monotonic()
        ready, wait = self.acc.ready(now, self._sendable)
        if self.txn is not None:
            ready = self._in_transaction(ready)
        by_node: dict[int, list[ProducerBatch]] = defaultdict(list)
        sizes: dict[int, int] = defaultdict(int)
        cluster = self.client.cluster
        for tp in ready:
            leader = cluster.leader_for(*tp)
            if leader < 0:
                self._need_metadata = True
                wait = min(wait, self.retry_backoff)
                continue
            batch = self.acc.pop_head(tp)
            if batch is None:
                continue
            if self.idempotent and (batch.base_sequence < 0
                                    or batch.producer_id != self.state.producer_id):
                # New, or re-sent after a producer id reset: the next sequence of tp.
                self.state.assign(batch)
            data = batch.build(self.compression)
            if self.txn is not None:
                from kafkactl.client.transaction_manager import mark_transactional

                data = batch.built = mark_transactional(data)
            if by_node[leader] and sizes[leader] + len(data) > self.request_size:
                self._send_produce(leader, by_node.pop(leader))
                sizes[leader] = 0
            by_node[leader].append(batch)
            sizes[leader] += len(data)
            batch.drained_ms = now
            self.in_flight[tp].append(batch)
        for node, batches in by_node.items():
            self._send_produce(node, batches)
        self._expire_batches(now)
        if self._need_metadata:
            wait = min(wait, max(self.client.metadata_backoff(), 0.001))
        # (ready partitions with no leader wait for the metadata, not in a busy loop)
        self.client.poll(0.0 if by_node else wait)

    def _new_topic_wanted(self) -> bool:
        with self.metadata_cond:
            wanted = list(self.wanted_topics)
        cluster = self.client.cluster
        return any(cluster.partitions_for(t) is None and t not in self.topic_errors
                   for t in wanted)

    def _in_transaction(self, ready: list[TopicPartition]) -> list[TopicPartition]:
        """The ready partitions that are in the ongoing transaction (AddPartitionsToTxn for
        the new ones first); none, and every queued batch failed, once the transaction has
        failed (so a commit's flush ends and the caller aborts)."""
        txn = self.txn
        assert txn is not None
        if txn.error is None and ready:
            new = [tp for tp in ready if tp not in txn.partitions]
            if new:
                try:
                    txn.add_partitions(new)
                except Exception as e:  # noqa: BLE001 - whatever it is, the txn is done
                    txn.fail(e)
        if txn.error is not None:
            self._fail_queued(txn.error)
            return []
        return [tp for tp in ready if tp in txn.partitions]

    def _fail_queued(self, err: BaseException) -> None:
        """Fail every batch not yet sent (the transaction they belong to will abort)."""
        with self.acc.lock:
            queued = [b for dq in self.acc.batches.values() for b in dq]
            for dq in self.acc.batches.values():
                dq.clear()
        for batch in queued:
            self._complete(batch, -1, err)

    def _sendable(self, tp: TopicPartition) -> bool:
        n = len(self.in_flight.get(tp, ()))
        if n >= self.max_in_flight_per_partition:
            return False
        # Until the broker has acknowledged a batch of this producer id and epoch on tp it
        # may hold no state for it and would take a later sequence first (after the first
        # batch was refused as too large and split, say): one batch in flight until then.
        state = self.state
        return n == 0 or not self.idempotent or \
            state.acked.get(tp) == (state.producer_id, state.epoch)

    # -- metadata and producer id --------------------------------------------------------------

    def _metadata_aged(self) -> bool:
        client = self.client
        return bool(self.wanted_topics) and \
            time.monotonic() - client.cluster.updated_at >= client.metadata_max_age

    def _update_metadata(self) -> None:
        with self.metadata_cond:
            topics = set(self.wanted_topics)
            self._need_metadata = False
        topics |= {tp[0] for tp in self.acc.batches}
        try:
            if topics:
                self.client.ensure_topics(sorted(topics), allow_auto_create=True,
                                          timeout=self.request_timeout_ms / 1000.0)
            else:
                self.client.refresh_metadata([])
            errors: dict[str, BaseException] = {}
        except UnknownTopicError as e:
            errors = {t: e for t in topics if self.client.cluster.partitions_for(t) is None}
        except (KafkaTimeoutError, KafkaConnectionError) as e:
            errors = {t: e for t in topics if self.client.cluster.partitions_for(t) is None}
            self._need_metadata = True
        with self.metadata_cond:
            self.topic_errors.update(errors)
            self.metadata_cond.notify_all()
        if errors and self.on_topic_error is not None:
            pending = {tp[0] for tp in self.acc.batches}
            for topic, error in errors.items():
                if topic in pending and isinstance(error, UnknownTopicError):
                    self.on_topic_error(topic, error)

    def _init_producer_id(self) -> None:
        conn = self.client.any_connection()
        if not conn.supports(ApiKey.INIT_PRODUCER_ID):
            self.idempotent = False
            self.max_in_flight_per_partition = 1
            return
        resp = conn.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        code = resp.get("error_code", 0)
        if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            # as Kafka's producer: fatal, every record fails at once and send() refuses
            # (retrying cannot help until an ACL changes)
            self.fatal_error = error_for(code)(
                "InitProducerId failed: CLUSTER_AUTHORIZATION_FAILED: an idempotent producer "
                "needs Write on a topic or IdempotentWrite on the cluster (or set "
                "enable.idempotence=false)")
            self._fail_all(self.fatal_error)
            return
        if code:
            raise error_for(code)(f"InitProducerId failed: {error_name(code)}")
        self.state.producer_id = resp["producer_id"]
        self.state.epoch = resp["producer_epoch"]
        self.state.next_sequence.clear()

    # -- produce requests ------------------------------------------------------------------------

    def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for b in batches:
            b.attempts += 1
            topics[b.topic].append({"index": b.partition, "records": b.built})
        body = {
            "transactional_id": None if self.txn is None else self.txn.transactional_id,
            "acks": self.acks, "timeout_ms": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in topics.items()],
        }
        expect = self.acks != 0

        def handler(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            self._on_produce_response(batches, resp, err, node)

        try:
            conn = self.client.connection(node)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            self.client.drop_connection(node, e)
            self._on_produce_response(batches, None, e, node, sent=False)
            return
        try:
            conn.send(ApiKey.PRODUCE, body, handler=handler if expect else None,
                      expect_response=expect)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            # A sent request was already failed (and retried) by the connection's close().
            if not expect:
                self._on_produce_response(batches, None, e, node)
            return
        if not expect:
            for b in batches:
                self._complete(b, -1, None)

    def _on_produce_response(self, batches: list[ProducerBatch], resp: dict[str, Any] | None,
                             err: BaseException | None, node: int = -1, *,
                             sent: bool = True) -> None:
        """A Produce request's answer; without one (`resp` None), `err` broke its
        connection, while it was sent or (not `sent`) before."""
        if resp is None:
            # Connection-level failure: every batch of the request is retried, in order,
            # to the leader the next metadata names (the partitions of the broker that
            # failed have none until then).
            self._tell_connection_error(node, err)
            if node >= 0:
                self.client.cluster.invalidate_node(node)
            else:
                for b in batches:
                    self.client.cluster.invalidate(b.topic, b.partition)
            self._need_metadata = True
            size = PRODUCE_OVERHEAD + sum(len(b.built or b"") + len(b.topic) + BATCH_OVERHEAD
                                          for b in batches)
            if sent and size > SOCKET_REQUEST_MAX_BYTES:
                # The same request would break the connection again, for
                # delivery.timeout.ms: not sent again
                refused = RecordTooLargeError(
                    f"the broker closed the connection while a produce request of {size} "
                    f"bytes was sent to it ({err}): the request may exceed the broker's "
                    f"socket.request.max.bytes ({SOCKET_REQUEST_MAX_BYTES} by default); "
                    f"lower max.request.size ({self.max_request_size}) below it, or raise "
                    "socket.request.max.bytes on the brokers")
                for b in batches:
                    self._retry_or_fail(b, ErrorCode.MESSAGE_TOO_LARGE, refused)
                return
            for b in batches:
                self._retry_or_fail(b, ErrorCode.NETWORK_EXCEPTION, err)
            return
        results: dict[TopicPartition, dict[str, Any]] = {}
        for t in resp.get("responses") or ():
            for p in t.get("partition_responses") or ():
                results[(t["name"], p["index"])] = p
        for b in batches:
            r = results.get((b.topic, b.partition))
            if r is None:
                self._retry_or_fail(b, ErrorCode.NETWORK_EXCEPTION,
                                    KafkaConnectionError("partition missing in response"))
                continue
            code = r.get("error_code", 0)
            if code in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                if b.base_sequence >= 0:
                    self.state.acked[(b.topic, b.partition)] = (b.producer_id,
                                                                b.producer_epoch)
                self._complete(b, r.get("base_offset", -1), None,
                               r.get("log_append_time_ms", -1) if code == 0 else -1)
            elif (code == ErrorCode.MESSAGE_TOO_LARGE and b.record_count > 1
                  and not self.force_close):
                # Split it and send the halves (down to single records, which fail alone).
                # Its sequences were never written: the halves take them (as Kafka's
                # producer does), so a transaction goes on; the later batches in flight
                # are refused out of order and sent again after the halves.
                self._remove_in_flight(b)
                self.acc.split_and_reenqueue(b)
            else:
                named = _named(code, r.get("error_message"))
                self._retry_or_fail(b, code, error_for(code)(named))

    def _tell_connection_error(self, node: int, err: BaseException | None) -> None:
        if self.on_connection_error is not None:
            try:
                self.on_connection_error(node, err)
            except Exception:  # (a listener's bug never stops the sender)
                _log_exception("connection error listener failed")

    def _retry_or_fail(self, batch: ProducerBatch, code: int, err: BaseException | None) -> None:
        self._remove_in_flight(batch)
        age = time.monotonic() - batch.created_ms / 1000.0
        if self.txn is not None and code not in PRODUCE_RETRIABLE:
            # a refused record of a transaction: the transaction can only abort (the
            # epoch is bumped then, so no producer id reset here); a fenced epoch ends
            # the producer
            error = err or KafkaConnectionError(f"produce failed ({code})")
            if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                self.txn.fenced(f"a write to {batch.topic}-{batch.partition} was refused")
                error = self.txn.fatal or error
            self.txn.fail(error)
            self._complete(batch, -1, error)
            return
        if code == ErrorCode.UNKNOWN_PRODUCER_ID and self.idempotent:
            # The broker lost our producer state: start over with a new producer id.
            self._reset_producer_id(batch)
            code = ErrorCode.NETWORK_EXCEPTION
        if code in PRODUCE_REFRESH_METADATA:
            self.client.cluster.invalidate(batch.topic, batch.partition)
            self._need_metadata = True
        if (code in PRODUCE_RETRIABLE and batch.attempts <= self.retries
                and age < self.delivery_timeout and not self.force_close):
            batch.retry_at = time.monotonic() + self.retry_backoff
            # (After a producer id reset the drain re-stamps it with the new id and the
            # next sequence; reenqueue keeps the old sequences' order meanwhile.)
            self.acc.reenqueue(batch)
            return
        if self.idempotent and batch.base_sequence >= 0 and not self.force_close:
            # The broker refused this batch for good (too large, invalid...), so its
            # sequence numbers were never written and every later batch of the partition
            # would be out of order: start a new producer id (Kafka's epoch bump, KIP-360)
            # so later batches are re-stamped from sequence 0 instead of waiting out
            # delivery.timeout.ms.
            self._reset_producer_id(batch)
        self._complete(batch, -1, err or KafkaConnectionError(f"produce failed ({code})"))

    def _reset_producer_id(self, batch: ProducerBatch) -> None:
        if self.txn is not None:
            self.txn.fail(KafkaConnectionError(
                f"a batch of {batch.topic}-{batch.partition} was refused"))
            return
        if batch.producer_id == self.state.producer_id:
            self.state.producer_id = -1
            self.state.next_sequence.clear()

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        lst = self.in_flight.get((batch.topic, batch.partition))
        if lst and batch in lst:
            lst.remove(batch)

    def _complete(self, batch: ProducerBatch, base_offset: int, err: BaseException | None,
                  log_append_time: int = -1) -> None:
        self._remove_in_flight(batch)
        try:
            batch.complete(base_offset, err, log_append_time)
        except Exception:
            _log_exception("delivery callback failed")
        finally:
            self.acc.done(batch)

    def _expire_batches(self, now: float) -> None:
        """Fail the queued batches made more than delivery.timeout.ms before `now`, as
        Kafka's RecordAccumulator.expiredBatches: a partition's queue is in creation
        order (a retried batch goes back in its place, split halves keep their batch's
        creation time), so each queue is read from its head only up to its first batch
        not expired, and none at all before the earliest creation time this found (or a
        batch put back since, `requeued_created`) has expired: a pass costs one look per
        partition at most, not one per queued batch."""
        acc = self.acc
        timeout = self.delivery_timeout
        expired: list[ProducerBatch] = []
        with acc.lock:
            earliest = min(self._earliest_created, acc.requeued_created)
            if now - earliest <= timeout:
                return  # (the same test as a batch's below, so never a batch missed)
            acc.requeued_created = float("inf")
            # a batch made from now on (under this lock) is made at `now` or later, as the
            # batch test reads its created_ms
            earliest = (now * 1000.0) / 1000.0
            for tp, dq in acc.batches.items():
                flying = self.in_flight.get(tp, ())
                i = 0
                while i < len(dq):
                    batch = dq[i]
                    created = batch.created_ms / 1000.0
                    if not now - created > timeout:
                        earliest = min(earliest, created)
                        break
                    if batch in flying:  # (looked at again next time)
                        earliest = min(earliest, created)
                        i += 1
                        continue
                    del dq[i]
                    expired.append(batch)
            self._earliest_created = earliest
        cluster = self.client.cluster
        for batch in expired:
            tp = (batch.topic, batch.partition)
            why = ""
            if cluster.reported_leaderless(*tp):
                why = f": partition {tp[0]}-{tp[1]} has no leader"
            elif cluster.leader_for(*tp) < 0:
                why = f": the leader of {tp[0]}-{tp[1]} could not be reached"
            self._complete(batch, -1, KafkaTimeoutError(
                f"{batch.record_count} records for {batch.topic}-{batch.partition} "
                f"expired after {self.delivery_timeout:g} s (delivery.timeout.ms)"
                f"{why}"))

    def _fail_all(self, err: BaseException) -> None:
        for batch in self.acc.all_batches():
            self._complete(batch, -1, err)
        for lst in list(self.in_flight.values()):
            for batch in list(lst):
                self._complete(batch, -1, err)
        with self.acc.lock:
            self.acc.batches.clear()


def _named(code: int, message: str | None) -> str:
    """A partition's Produce error as told: its name, then the broker's message (a broker
    may send none)."""
    name = error_name(code)
    if not message:
        return name
    return message if name in message else f"{name}: {message}"
