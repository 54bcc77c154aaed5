"""Transaction markers (Kafka's TransactionMarkerChannelManager and the broker side of
WriteTxnMarkers).

`MarkerWriter.write` appends a COMMIT or ABORT control batch to partitions this broker leads
(acks=all: it returns once the in-sync replicas have it) and, for a `__consumer_offsets`
partition, tells the group coordinator so the transaction's offsets become visible or are
dropped. The WriteTxnMarkers handler and the coordinator's own sender (for partitions it
leads itself, in process) both use it.

`MarkerSender.send` delivers the markers of one completed transaction to every partition's
leader: grouped by leader (from the metadata cache), over the inter-broker channel to the
others (WriteTxnMarkers v1), retried with a growing pause until each leader has appended
its markers (NOT_LEADER_OR_FOLLOWER and the like: the leader is looked up again; a
partition whose topic is gone is dropped, as Kafka does). Then `on_done` writes
CompleteCommit / CompleteAbort. A sender that is no longer the coordinator of the id (its
`__transaction_state` partition moved) stops: the new coordinator sends them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.coordinator.transaction_metadata import TopicPartition
from kafkactl.cluster.broker_connection import (
    CONNECTION_ERRORS,
    PLAINTEXT,
    BrokerConnection,
    InterBrokerSecurity,
)
from kafkactl.log.errors import LogError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError
from kafkactl.record.builder import RecordBatchBuilder

if TYPE_CHECKING:
    from kafkactl.broker.metadata_cache import MetadataCache
    from kafkactl.broker.partition import Partition
    from kafkactl.broker.partition_store import PartitionStore
    from kafkactl.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 30.0
RETRY_MIN_S = 0.02
RETRY_MAX_S = 1.0
MARKER_BYTES = 78  # one control record's batch: what a waiting fetch counts
# A partition leader's answers that stop the sending (Kafka's abortSending): a newer
# producer epoch or coordinator has written there already.
SEND_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, KafkaError)
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int,
                  commit: bool, timestamp_ms: int) -> bytes:
    """One control batch: key ControlRecordType (version 0, type 0 ABORT / 1 COMMIT),
    value EndTransactionMarker (version 0, coordinator epoch)."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                 is_transactional=True, is_control=True)
    key = (0).to_bytes(2, "big") + (1 if commit else 0).to_bytes(2, "big")
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big", signed=True)
    builder.append(timestamp_ms, key, value)
    return builder.build()


class MarkerWriter:
    """Appends markers to the partitions this broker leads."""

    def __init__(self, partitions: PartitionStore, replica_manager: ReplicaManager) -> None:
        self.partitions = partitions
        self.replica_manager = replica_manager
        # group_coordinator.handle_txn_completion(producer_id, offsets_partition, commit)
        self.offsets_completed: Callable[[int, int, bool], Any] | None = None

    def _append(self, part: Partition, producer_id: int, producer_epoch: int,
                coordinator_epoch: int, commit: bool) -> int:
        append = getattr(part, "append_control_batch", None)
        if append is not None:
            return int(append(producer_id, producer_epoch, coordinator_epoch, commit))
        # a log without transaction support: the marker is stored all the same
        import time

        buf = control_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                            int(time.time() * 1000))
        info = part.log.append(memoryview(bytearray(buf)), leader_epoch=part.leader_epoch)
        return int(info.first_offset)

    async def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                    commit: bool, tps: Iterable[TopicPartition]) -> dict[TopicPartition,
                                                                         ErrorCode]:
        rm = self.replica_manager
        results: dict[TopicPartition, ErrorCode] = {}
        waiting: dict[TopicPartition, int] = {}
        for tp in tps:
            part = self.partitions.get_partition(*tp)
            if part is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not part.is_leader:
                results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            try:
                offset = self._append(part, producer_id, producer_epoch, coordinator_epoch,
                                      commit)
            except KafkaError as e:
                results[tp] = ErrorCode(e.code)
                continue
            except LogError as e:
                log.warning("cannot write a transaction marker to %s-%d: %s", *tp, e)
                results[tp] = ErrorCode(e.code)
                continue
            results[tp] = ErrorCode.NONE
            rm.count_append(tp[0], MARKER_BYTES, 1)  # messages and bytes in, as Kafka
            rm.purgatory.notify_append(tp, MARKER_BYTES, consumers=not part.replicated)
            if part.maybe_advance_high_watermark():
                rm.high_watermark_moved(part)
            else:
                rm.purgatory.high_watermark_moved(tp)  # the LSO may have moved
            if part.high_watermark < offset + 1:
                waiting[tp] = offset + 1
        if waiting:
            purgatory = rm.produce_purgatory
            op = purgatory.watch(waiting)
            results.update(await purgatory.wait_for(op, MARKER_TIMEOUT_S))
        if self.offsets_completed is not None:
            for (topic, p), code in results.items():
                if topic == OFFSETS_TOPIC and code == ErrorCode.NONE:
                    try:
                        done = self.offsets_completed(producer_id, p, commit)
                        if asyncio.iscoroutine(done):
                            await done
                    except Exception:
                        log.exception("the group coordinator failed to complete the "
                                      "transaction of producer %d on %s-%d", producer_id,
                                      OFFSETS_TOPIC, p)
        return results


class MarkerSender:
    """Delivers a transaction's markers to the partitions' leaders (module doc)."""

    def __init__(self, broker_id: int, cache: MetadataCache, writer: MarkerWriter,
                 security: InterBrokerSecurity = PLAINTEXT,
                 timeout_s: float = MARKER_TIMEOUT_S) -> None:
        self.broker_id = broker_id
        self.timeout_s = timeout_s  # request.timeout.ms: a leader that does not answer
        self.cache = cache
        self.writer = writer
        self.security = security
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopped = False

    def send(self, transactional_id: str, producer_id: int, producer_epoch: int,
             coordinator_epoch: int, commit: bool, tps: Iterable[TopicPartition],
             still_coordinator: Callable[[], bool],
             on_done: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._deliver(
            transactional_id, producer_id, producer_epoch, coordinator_epoch, commit,
            set(tps), still_coordinator, on_done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def stop(self) -> None:
        self.stopped = True
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    async def _deliver(self, txn_id: str, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, commit: bool, pending: set[TopicPartition],
                       still_coordinator: Callable[[], bool],
                       on_done: Callable[[], Awaitable[None]]) -> None:
        pause = RETRY_MIN_S
        what = "COMMIT" if commit else "ABORT"
        try:
            while pending:
                if self.stopped or not still_coordinator():
                    log.info("%s markers of %s left to the new coordinator", what, txn_id)
                    return
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(pending):
                    topic = self.cache.topic(tp[0])
                    meta = None if topic is None else topic.partitions.get(tp[1])
                    if meta is None:  # deleted: nothing to mark (Kafka skips it too)
                        log.info("%s marker of %s for %s-%d skipped: the partition is gone",
                                 what, txn_id, *tp)
                        pending.discard(tp)
                        continue
                    if meta.leader >= 0:
                        by_leader.setdefault(meta.leader, []).append(tp)
                sends = [self._send_to(leader, producer_id, producer_epoch, coordinator_epoch,
                                       commit, tps) for leader, tps in by_leader.items()]
                # one leader (a standalone broker: itself) needs no Task of its own
                results = [await sends[0]] if len(sends) == 1 else await asyncio.gather(*sends)
                fenced = False
                for answers in results:
                    for tp, code in answers.items():
                        if code == ErrorCode.NONE:
                            pending.discard(tp)
                        elif code in FENCED:
                            fenced = True
                            log.warning("%s marker of %s refused by %s-%d: %s; stopping",
                                        what, txn_id, tp[0], tp[1], code.name)
                        elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and \
                                self.cache.topic(tp[0]) is None:
                            pending.discard(tp)
                if fenced:
                    return
                if pending:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, RETRY_MAX_S)
            await on_done()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("sending the %s markers of %s failed", what, txn_id)

    async def _send_to(self, leader: int, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, commit: bool, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, ErrorCode]:
        if leader == self.broker_id:
            return await self.writer.write(producer_id, producer_epoch, coordinator_epoch,
                                           commit, tps)
        broker = next((b for b in self.cache.brokers() if b.node_id == leader), None)
        address = None if broker is None else broker.endpoint(self.security.listener)
        if address is None:
            return {}  # not known yet: the caller pauses and looks again
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]}
        lock = self._locks.setdefault(leader, asyncio.Lock())
        async with lock:  # one request in flight per connection
            conn = self._connections.get(leader)
            if conn is None or (conn.host, conn.port) != address:
                if conn is not None:
                    conn.close()
                conn = self._connections[leader] = BrokerConnection(
                    *address, client_id=f"kafkactl-txn-coordinator-{self.broker_id}",
                    security=self.security)
            try:
                resp = await conn.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                                          body, self.timeout_s)
            except SEND_ERRORS as e:
                log.info("WriteTxnMarkers to broker %d failed (%s: %s); will retry", leader,
                         type(e).__name__, e)
                return {}
        out: dict[TopicPartition, ErrorCode] = {}
        for marker in resp.get("markers") or ():
            for t in marker.get("topics") or ():
                for pr in t.get("partitions") or ():
                    out[(t["name"], pr["partition_index"])] = _code(pr["error_code"])
        return out


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
