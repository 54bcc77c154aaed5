"""TransactionCoordinator (Kafka's TransactionCoordinator, KIP-98 / KIP-360 / KIP-664).

InitProducerId with a transactional id, AddPartitionsToTxn (and the KIP-890 verification),
AddOffsetsToTxn (through add_partitions), EndTxn, DescribeTransactions and
ListTransactions; the periodic abort of transactions that outlived their timeout
(`transaction.abort.timed.out.transaction.cleanup.interval.ms`) and the expiry of idle
transactional ids (`transactional.id.expiration.ms`). Each change is written to
`__transaction_state` before it is acted on (transaction_state_manager.py); the markers of
a finished transaction go to the partitions' leaders (transaction_markers.py), then
CompleteCommit / CompleteAbort is written. EndTxn answers once PrepareCommit /
PrepareAbort is written, as Kafka does; until the markers are all written the next
request of that producer gets CONCURRENT_TRANSACTIONS (clients retry it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.broker.coordinator.transaction_markers import MarkerSender, MarkerWriter
from kafkactl.broker.coordinator.transaction_metadata import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from kafkactl.broker.coordinator.transaction_state_manager import (
    TXN_TOPIC,
    TransactionStateManager,
)
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.metadata_cache import MetadataCache
    from kafkactl.broker.partition_store import PartitionStore
    from kafkactl.broker.producer_id_manager import ProducerIdManager
    from kafkactl.broker.replica_manager import ReplicaManager
    from kafkactl.broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

DEFAULT_MAX_TIMEOUT_MS = 900000
DEFAULT_ABORT_INTERVAL_MS = 10000
DEFAULT_EXPIRATION_MS = 604800000
DEFAULT_EXPIRE_INTERVAL_MS = 3600000
RETRY_MIN_S = 0.02
RETRY_MAX_S = 1.0
# A request that finds its transaction completing (markers being written) waits this long
# for it before answering CONCURRENT_TRANSACTIONS: the client's retry backoff is longer
# than writing the markers usually takes.
COMPLETION_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, cache: MetadataCache, topic_admin: TopicAdmin,
                 partitions: PartitionStore, replica_manager: ReplicaManager,
                 producer_ids: ProducerIdManager | None, *, broker_id: int,
                 inter_broker: InterBrokerSecurity = PLAINTEXT,
                 group_coordinator: Any = None,
                 time_fn: Callable[[], float] = time.time) -> None:
        self.manager = TransactionStateManager(config, topic_admin, partitions, replica_manager,
                                               time_fn=time_fn)
        self.writer = MarkerWriter(partitions, replica_manager)
        # a marker on a __consumer_offsets partition settles the transaction's offsets
        self.writer.offsets_completed = getattr(group_coordinator, "handle_txn_completion",
                                                None)
        self.sender = MarkerSender(
            broker_id, cache, self.writer, inter_broker,
            max(config.get_int_or("request.timeout.ms", 30000), 100) / 1000)
        self.producer_ids = producer_ids
        self.max_timeout_ms = config.get_int_or("transaction.max.timeout.ms",
                                                DEFAULT_MAX_TIMEOUT_MS)
        self.abort_interval_ms = config.get_int_or(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            DEFAULT_ABORT_INTERVAL_MS)
        self.expiration_ms = config.get_int_or("transactional.id.expiration.ms",
                                               DEFAULT_EXPIRATION_MS)
        self.expire_interval_ms = config.get_int_or(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            DEFAULT_EXPIRE_INTERVAL_MS)
        self.active = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._completing: dict[str, asyncio.Task[None]] = {}  # markers being written
        self._started = asyncio.Event()  # loaded transactions are completed once started

    @property
    def txns(self) -> dict[str, TxnMetadata]:
        return self.manager.txns

    def now_ms(self) -> int:
        return self.manager.now_ms()

    # ---- lifecycle ----------------------------------------------------------------------
    async def startup(self) -> None:
        self.active = True
        self._started.set()
        self._spawn(self._every(self.abort_interval_ms, self.abort_timed_out))
        self._spawn(self._every(self.expire_interval_ms, self.expire_ids))

    async def shutdown(self) -> None:
        self.active = False
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t
        await self.sender.stop()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                await fn()
            except Exception:
                log.exception("transaction coordinator: periodic %s failed",
                              getattr(fn, "__name__", fn))

    # ---- leadership of __transaction_state partitions -------------------------------------
    # The coordinator serves the ids of the __transaction_state partitions this broker
    # leads: elected()/resigned() follow the controller's decisions, a cluster's or a
    # standalone broker's own (kafkactl.broker.replica_state calls them).
    def elected(self, partition: int) -> None:
        owned = self.manager.owned
        self.manager.sync_partition_count()
        part = self.manager.partitions.get_partition(TXN_TOPIC, partition)
        epoch = part.leader_epoch if part is not None else 0
        if partition in owned and self.manager.coordinator_epochs.get(partition) == epoch:
            return
        owned.add(partition)
        if part is not None and part.log_start_offset >= part.log_end_offset:
            self.manager.coordinator_epochs[partition] = epoch  # nothing to replay
            return
        self.manager.loading.add(partition)
        self._spawn(self._load_partition(partition))

    async def _load_partition(self, partition: int) -> None:
        try:
            pending = await self.manager.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d failed", TXN_TOPIC, partition)
            self.manager.loading.discard(partition)
            return
        await self._started.wait()  # a broker starting up: once it serves
        for txn in pending:
            if self.txns.get(txn.transactional_id) is txn:
                self._resume(txn)

    def resigned(self, partition: int) -> None:
        owned = self.manager.owned
        if partition not in owned:
            return
        owned.discard(partition)
        gone = self.manager.unload_partition(partition)
        if gone:
            log.info("%s-%d led elsewhere now: %d transactional id(s) leave this "
                     "coordinator", TXN_TOPIC, partition, len(gone))

    def _resume(self, txn: TxnMetadata) -> None:
        """A loaded transaction in PrepareCommit / PrepareAbort: send its markers again."""
        epoch = self.manager.coordinator_epoch(self.manager.partition_for(txn.transactional_id))
        try:
            complete = txn.prepare_complete(self.now_ms())
        except IllegalTransition as e:
            log.error("cannot complete %s: %s", txn.transactional_id, e)
            return
        log.info("completing the %s of %s (producer %d, epoch %d) left by the previous "
                 "coordinator", "commit" if txn.state == TxnState.PREPARE_COMMIT else "abort",
                 txn.transactional_id, txn.producer_id, txn.producer_epoch)
        self._send_markers(txn, epoch, complete)

    # ---- common checks ------------------------------------------------------------------
    def check(self, transactional_id: str | None) -> ErrorCode:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return self.manager.check(transactional_id)

    def coordinator_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    def _next_producer_id(self) -> int | None:
        if self.producer_ids is None:
            return None
        try:
            return self.producer_ids.next_id()
        except Exception as e:  # a cluster's block from ZooKeeper, which is away: retriable
            log.warning("cannot allocate a producer id: %s: %s", type(e).__name__, e)
            return None

    async def _write(self, txn: TxnMetadata, new: TxnTransit) -> ErrorCode:
        """Write `new` and complete it, or drop the pending change on an error."""
        txn_id = txn.transactional_id
        epoch = self.manager.coordinator_epoch(self.manager.partition_for(txn_id))
        code = await self.manager.write(txn_id, epoch, new)
        if self.txns.get(txn_id) is not txn:  # unloaded (or expired) meanwhile
            return ErrorCode.NOT_COORDINATOR if code == ErrorCode.NONE else code
        if code != ErrorCode.NONE:
            txn.pending_state = None
            return code
        txn.complete_transition(new)
        return ErrorCode.NONE

    # ---- InitProducerId -------------------------------------------------------------------
    async def _txn_for_init(self, transactional_id: str, timeout_ms: int
                            ) -> tuple[ErrorCode, TxnMetadata | None]:
        """The id's metadata (a new one, with a new producer id, for an unknown id), once a
        completing transaction of it has (or has not, in the bounded wait) completed."""
        txn = self.txns.get(transactional_id)
        if txn is not None and txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            await self._await_completion(txn)
            code = self.check(transactional_id)
            if code != ErrorCode.NONE:
                return code, None
            txn = self.txns.get(transactional_id)
        if txn is None:
            pid = self._next_producer_id()
            if pid is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            txn = TxnMetadata(transactional_id, pid, timeout_ms=timeout_ms,
                              last_update_ms=self.now_ms())
            self.txns[transactional_id] = txn
        return ErrorCode.NONE, txn

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitResult:
        """`expected`: the producer's (id, epoch) of a KIP-360 bump, else None."""
        code = self.check(transactional_id)
        if code != ErrorCode.NONE:
            return InitResult(code)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        code, txn = await self._txn_for_init(transactional_id, timeout_ms)
        if txn is None:
            return InitResult(code)
        now = self.now_ms()
        if txn.pending_transition:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_producer_id(txn, expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        state = txn.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == TxnState.ONGOING:
            # fence the producer of the ongoing transaction and abort it first; the client
            # retries (CONCURRENT_TRANSACTIONS) and then gets the next epoch
            fence = txn.prepare_fence_epoch()
            code = await self.end_txn(transactional_id, fence.producer_id, fence.producer_epoch,
                                      commit=False, from_client=False)
            if txn.pending_state == TxnState.PREPARE_EPOCH_FENCE:
                txn.pending_state = None
            return InitResult(code if code != ErrorCode.NONE
                              else ErrorCode.CONCURRENT_TRANSACTIONS)
        if state not in COMPLETED:
            return InitResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            pid = self._next_producer_id()
            if pid is None:
                return InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            new: TxnTransit | None = txn.prepare_producer_id_rotation(
                pid, timeout_ms, now, expected is not None)
        else:
            new = txn.prepare_increment_epoch(timeout_ms,
                                              None if expected is None else expected[1], now)
        if new is None:
            return InitResult(ErrorCode.PRODUCER_FENCED)
        code = await self._write(txn, new)
        if code != ErrorCode.NONE:
            return InitResult(code)
        log.info("initialized transactional id %s: producer %d, epoch %d", transactional_id,
                 new.producer_id, new.producer_epoch)
        return InitResult(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------
    def _producer_check(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TxnMetadata | None]:
        code = self.check(transactional_id)
        if code != ErrorCode.NONE:
            return code, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, txn

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, tps: Iterable[TopicPartition]) -> ErrorCode:
        code, txn = self._producer_check(transactional_id, producer_id, producer_epoch)
        if txn is not None and txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            await self._await_completion(txn)
            code, txn = self._producer_check(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return code
        if txn.pending_transition or txn.state in (TxnState.PREPARE_COMMIT,
                                                   TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        added = set(tps)
        if txn.state == TxnState.ONGOING and added <= txn.partitions:
            return ErrorCode.NONE
        try:
            new = txn.prepare_add_partitions(added, self.now_ms())
        except IllegalTransition as e:
            log.warning("%s", e)
            return ErrorCode.INVALID_TXN_STATE
        return await self._write(txn, new)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          tps: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's check by a partition leader: is each partition in the transaction?"""
        wanted = list(tps)
        code, txn = self._producer_check(transactional_id, producer_id, producer_epoch)
        if txn is not None and txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            code, txn = ErrorCode.CONCURRENT_TRANSACTIONS, None
        if txn is None:
            return {tp: code for tp in wanted}
        return {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in wanted}

    # ---- EndTxn -------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      *, commit: bool, from_client: bool = True) -> ErrorCode:
        code = self.check(transactional_id)
        if code != ErrorCode.NONE:
            return code
        txn = self.txns.get(transactional_id)
        if txn is not None and from_client:
            await self._await_completion(txn)  # the last EndTxn's markers
            txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != txn.producer_epoch) or \
                producer_epoch < txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        fencing = txn.pending_state == TxnState.PREPARE_EPOCH_FENCE
        if txn.pending_transition and not fencing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state == TxnState.ONGOING:
            if fencing and (commit or from_client):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if fencing:  # the abort writes the bumped epoch (never returned before)
                txn.pending_state = None
                txn.producer_epoch = producer_epoch
                txn.last_producer_epoch = NO_PRODUCER_EPOCH
            new = txn.prepare_abort_or_commit(
                TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, self.now_ms())
        else:
            return _end_in_state(state, commit)
        coordinator_epoch = self.manager.coordinator_epoch(
            self.manager.partition_for(transactional_id))
        code = await self._write(txn, new)
        if code != ErrorCode.NONE:
            if fencing and self.txns.get(transactional_id) is txn:
                txn.has_failed_epoch_fence = True
            return code
        if txn.pending_transition or txn.producer_epoch != producer_epoch:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        complete = txn.prepare_complete(self.now_ms())
        log.debug("%s %s of %s: markers to %d partition(s)", "committing" if commit else
                  "aborting", transactional_id, producer_id, len(new.partitions))
        self._send_markers(txn, coordinator_epoch, complete)
        return ErrorCode.NONE

    def _send_markers(self, txn: TxnMetadata, coordinator_epoch: int,
                      complete: TxnTransit) -> None:
        txn_id = txn.transactional_id
        commit = complete.state == TxnState.COMPLETE_COMMIT

        def still_coordinator() -> bool:
            return self.active and self.txns.get(txn_id) is txn and \
                self.manager.owns(txn_id, coordinator_epoch)

        async def done() -> None:
            await self._write_complete(txn, coordinator_epoch, complete)

        task = self.sender.send(txn_id, txn.producer_id, txn.producer_epoch,
                                coordinator_epoch, commit, txn.partitions, still_coordinator,
                                done)
        self._completing[txn_id] = task

        def finished(t: asyncio.Task[None]) -> None:
            if self._completing.get(txn_id) is t:
                del self._completing[txn_id]

        task.add_done_callback(finished)

    async def _await_completion(self, txn: TxnMetadata) -> None:
        """A transaction in PrepareCommit / PrepareAbort: wait (bounded) for its markers
        and CompleteCommit / CompleteAbort."""
        if txn.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return
        task = self._completing.get(txn.transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=COMPLETION_WAIT_S)

    async def _write_complete(self, txn: TxnMetadata, coordinator_epoch: int,
                              complete: TxnTransit) -> None:
        """Every marker is written: CompleteCommit / CompleteAbort, retried while this broker
        still coordinates the id (a new coordinator completes it otherwise)."""
        txn_id = txn.transactional_id
        pause = RETRY_MIN_S
        while self.active and self.txns.get(txn_id) is txn:
            code = await self.manager.write(txn_id, coordinator_epoch, complete)
            if self.txns.get(txn_id) is not txn:
                return
            if code == ErrorCode.NONE:
                txn.complete_transition(complete)
                return
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                txn.pending_state = None
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX_S)

    # ---- periodic work ------------------------------------------------------------------
    async def abort_timed_out(self) -> None:
        """Abort the ongoing transactions older than their timeout, fencing their producer
        (the epoch is bumped: its next request is refused)."""
        now = self.now_ms()
        for txn in list(self.txns.values()):
            if txn.state != TxnState.ONGOING or txn.pending_transition or \
                    txn.start_ms + txn.timeout_ms >= now or \
                    self.manager.check(txn.transactional_id) != ErrorCode.NONE:
                continue
            try:
                fence = txn.prepare_fence_epoch()
            except IllegalTransition as e:
                log.warning("cannot abort timed-out %s: %s", txn.transactional_id, e)
                continue
            log.info("aborting the transaction of %s (producer %d, epoch %d): it started %d ms "
                     "ago, its timeout is %d ms", txn.transactional_id, txn.producer_id,
                     txn.producer_epoch, now - txn.start_ms, txn.timeout_ms)
            code = await self.end_txn(txn.transactional_id, fence.producer_id,
                                      fence.producer_epoch, commit=False, from_client=False)
            if code != ErrorCode.NONE:
                if txn.pending_state == TxnState.PREPARE_EPOCH_FENCE:
                    txn.pending_state = None
                log.warning("aborting timed-out %s failed: %s", txn.transactional_id,
                            code.name)

    async def expire_ids(self) -> None:
        """Remove the transactional ids idle for transactional.id.expiration.ms (a
        tombstone in __transaction_state)."""
        now = self.now_ms()
        for txn in list(self.txns.values()):
            if txn.state not in COMPLETED or txn.pending_transition or \
                    txn.last_update_ms + self.expiration_ms > now or \
                    self.manager.check(txn.transactional_id) != ErrorCode.NONE:
                continue
            dead = txn.prepare_dead()
            code = await self._write(txn, dead)
            if code == ErrorCode.NONE and self.txns.get(txn.transactional_id) is txn:
                del self.txns[txn.transactional_id]
                log.info("transactional id %s expired (idle since %d)", txn.transactional_id,
                         txn.last_update_ms)

    # ---- DescribeTransactions / ListTransactions --------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        code = self.check(transactional_id)
        if code != ErrorCode.NONE:
            return code, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state == TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, txn

    def list(self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int
             ) -> tuple[ErrorCode, list[str], list[TxnMetadata]]:
        """(error, unknown state names, matching transactions)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self.manager.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for name in states:
            s = TxnState.from_name(name)
            if s is None:
                unknown.append(name)
            else:
                wanted.add(s)
        pids = set(producer_ids)
        now = self.now_ms()
        out = []
        for txn in self.txns.values():  # Kafka's listTransactionStates filters
            if txn.state == TxnState.DEAD:
                continue
            if (wanted or unknown) and txn.state not in wanted:
                continue  # only unknown states asked: nothing matches
            if pids and txn.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and now - txn.start_ms <= min_duration_ms:
                continue  # as Kafka: an id with no transaction yet (start -1) passes
            out.append(txn)
        return ErrorCode.NONE, unknown, out


def _end_in_state(state: TxnState, commit: bool) -> ErrorCode:
    """EndTxn's answer in a state other than Ongoing (Kafka's): a retry of a completed end
    succeeds, one still completing is CONCURRENT_TRANSACTIONS, the opposite end or no
    transaction at all is INVALID_TXN_STATE."""
    if state == TxnState.COMPLETE_COMMIT:
        return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
    if state == TxnState.COMPLETE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
    if state == TxnState.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
    if state == TxnState.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
    if state == TxnState.EMPTY:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _valid_producer_id(txn: TxnMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's isValidProducerId: a KIP-360 bump of the current producer id, of a new
    metadata, or the retry of a producer id rotation."""
    pid, epoch = expected
    return txn.producer_epoch == NO_PRODUCER_EPOCH or pid == txn.producer_id or \
        (pid == txn.last_producer_id and is_epoch_exhausted(epoch))
