"""A leader's ISR changes go through the controller (Kafka's AlterPartitionManager): the
leader asks with AlterPartition (its leader epoch and the partition epoch it knows), the
controller checks both, writes the partition state znode conditionally and answers with
the new partition epoch; only then does the leader use the new ISR (meanwhile its high
watermark counts the proposed members too: Partition.maximal_isr). One change per
partition in flight.

A change is sent again, as it was, until the controller answers it (a timeout, a lost
connection, no controller known, NOT_CONTROLLER): the controller may have applied it
without the answer getting here (ZooKeeper away longer than the request timeout), and
it answers a request for the state the partition is already in with that state and its
partition epoch, so the repeat learns the outcome. A LeaderAndIsr for the partition
replaces the change (Kafka: the response is ignored once partitionState changed). The
controller's refusals that say this leader's view is stale (INVALID_UPDATE_VERSION,
FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST)
leave the change pending until the LeaderAndIsr that brings the new state, as Kafka's
Partition.handleAlterPartitionError: proposing again at the same stale epoch is refused
every time. INELIGIBLE_REPLICA (and OPERATION_NOT_ATTEMPTED) says the epoch is right and
nothing was applied: the committed ISR is used again, and the next check proposes anew.

The ISR shrinks and expansions counted (IsrShrinksPerSec / IsrExpandsPerSec) are the ones
the controller accepted, as Kafka's AlterPartitionListener marks them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkactl.broker.partition import Partition
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster.broker_connection import (
    CONNECTION_ERRORS,
    PLAINTEXT,
    BrokerConnection,
    InterBrokerSecurity,
)
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 1
REQUEST_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = 0.5
SEND_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, KafkaError, LookupError)


# refusals that leave the change pending until a LeaderAndIsr (the leader's view is stale)
AWAIT_LEADER_AND_ISR = frozenset({
    ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.INVALID_REQUEST})
# refusals that say nothing was applied at this (current) epoch: back to the committed ISR
NOT_APPLIED = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})

Key = tuple[str, int]


@dataclass(slots=True)
class PendingIsrChange:
    """One partition's ISR change as sent (Kafka's PendingPartitionChange and its
    sentLeaderAndIsr): sent again unchanged until answered or replaced."""

    part: Partition
    isr: list[int]
    leader_epoch: int
    partition_epoch: int
    expand: bool  # a replica joins (else one leaves)
    refusals: int = 0  # answers that said "send it again" (the first is logged)

    @property
    def current(self) -> bool:
        """Still the partition's change in flight: no LeaderAndIsr has replaced it."""
        p = self.part
        return (p.is_leader and p.pending_isr == self.isr
                and p.leader_epoch == self.leader_epoch
                and p.partition_epoch == self.partition_epoch)


class IsrChanger:
    def __init__(self, broker_id: int, cache: ZkMetadataCache,
                 broker_epoch: Callable[[], int],
                 on_changed: Callable[[Partition], None],
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.security = security
        self.cache = cache
        self.broker_epoch = broker_epoch
        self.on_changed = on_changed
        self._queue: dict[Key, PendingIsrChange] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._stopped = False
        self._failures = 0  # AlterPartition sends failed in a row (the first is logged)
        # ISR changes the controller accepted (IsrExpandsPerSec / IsrShrinksPerSec)
        self.expands = 0
        self.shrinks = 0

    def submit(self, part: Partition, new_isr: list[int]) -> None:
        if self._stopped:  # the broker is stopping: no ISR changes any more (Kafka's too)
            return
        expand = not set(new_isr) <= set(part.isr)
        part.propose_isr(new_isr)
        self._queue[(part.topic, part.partition)] = PendingIsrChange(
            part, list(new_isr), part.leader_epoch, part.partition_epoch, expand)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = {k: c for k, c in self._queue.items() if c.current}
            self._queue = {}
            if not batch:
                continue
            try:
                response = await self._send(batch)
            except SEND_ERRORS as e:
                self._send_again(batch, f"{type(e).__name__}: {e}")
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            again = self._apply(batch, response)
            if again:
                self._send_again(again, "")
                await asyncio.sleep(RETRY_BACKOFF_S)

    def _send_again(self, changes: dict[Key, PendingIsrChange], why: str) -> None:
        """Queue `changes` again as they were (those still current and not replaced)."""
        if why:
            self._failures += 1
            log.log(logging.INFO if self._failures == 1 else logging.DEBUG,
                    "AlterPartition to the controller failed (%s); sending it again", why)
        for key, change in changes.items():
            if change.current:
                self._queue.setdefault(key, change)
        if self._queue:
            self._wakeup.set()

    async def _send(self, batch: dict[Key, PendingIsrChange]) -> dict[str, Any]:
        controller = self.cache.broker(self.cache.controller_id())
        address = controller.endpoint(self.security.listener) if controller else None
        if address is None:
            raise LookupError("no controller known yet")
        conn = self._connection
        if conn is None or (conn.host, conn.port) != address:
            if conn is not None:
                conn.close()
            conn = self._connection = BrokerConnection(
                *address, client_id=f"kafkactl-broker-{self.broker_id}",
                security=self.security)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), change in batch.items():
            topics.setdefault(topic, []).append({
                "partition_index": p, "leader_epoch": change.leader_epoch,
                "new_isr": change.isr, "leader_recovery_state": 0,
                "partition_epoch": change.partition_epoch})
        body = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch(),
                "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}
        return await conn.request(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, body,
                                  REQUEST_TIMEOUT_S)

    def _apply(self, batch: dict[Key, PendingIsrChange], response: dict[str, Any]
               ) -> dict[Key, PendingIsrChange]:
        """Take in the controller's answers; the changes to send again."""
        if response.get("error_code"):  # NOT_CONTROLLER, ...: the whole request again
            self._failures += 1
            log.log(logging.INFO if self._failures == 1 else logging.DEBUG,
                    "AlterPartition refused: %s; sending it again",
                    ErrorCode(response["error_code"]).name)
            return batch
        self._failures = 0
        again = dict(batch)  # a partition the answer leaves out is sent again
        for t in response.get("topics") or []:
            for r in t["partitions"]:
                key = (t["topic_name"], r["partition_index"])
                change = again.pop(key, None)
                if change is not None and change.current and self._answered(change, r):
                    again[key] = change
        return again

    def _answered(self, change: PendingIsrChange, r: dict[str, Any]) -> bool:
        """Take in one partition's answer; True: send the change again."""
        part, code = change.part, r["error_code"]
        if code == ErrorCode.NONE:
            if r["leader_epoch"] != part.leader_epoch or \
                    r["partition_epoch"] < part.partition_epoch:
                log.info("%s: ignoring the controller's ISR %s at leader epoch %d, "
                         "partition epoch %d (here %d, %d); waiting for its LeaderAndIsr",
                         part, r["isr"], r["leader_epoch"], r["partition_epoch"],
                         part.leader_epoch, part.partition_epoch)
                return False
            if change.expand:
                self.expands += 1
            else:
                self.shrinks += 1
            log.info("%s: ISR is now %s (partition epoch %d)", part, r["isr"],
                     r["partition_epoch"])
            if part.set_isr(list(r["isr"]), r["partition_epoch"]):
                self.on_changed(part)
            return False
        name = ErrorCode(code).name
        if code in AWAIT_LEADER_AND_ISR:
            log.info("%s: ISR change to %s refused: %s; waiting for the controller's "
                     "LeaderAndIsr", part, change.isr, name)
            return False
        if code in NOT_APPLIED:
            log.info("%s: ISR change to %s refused: %s", part, change.isr, name)
            part.isr_change_pending = False
            return False
        # NOT_CONTROLLER (a controller behind ZooKeeper), an unexpected error: again
        change.refusals += 1
        log.log(logging.INFO if change.refusals == 1 else logging.DEBUG,
                "%s: ISR change to %s refused: %s; sending it again", part, change.isr, name)
        return True
