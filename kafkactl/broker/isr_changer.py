"""A leader's ISR changes go through the controller (Kafka's AlterPartitionManager): the
leader asks with AlterPartition (its leader epoch and the partition epoch it knows), the
controller checks both, writes the partition state znode conditionally and answers with
the new partition epoch; only then does the leader use the new ISR (meanwhile its high
watermark counts the proposed members too: Partition.maximal_isr). One change per
partition in flight; a refused or lost request is simply proposed again by the next
follower fetch or ISR check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
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
        self._queue: dict[tuple[str, int], tuple[Partition, list[int]]] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._stopped = False

    def submit(self, part: Partition, new_isr: list[int]) -> None:
        if self._stopped:  # the broker is stopping: no ISR changes any more (Kafka's too)
            return
        part.propose_isr(new_isr)
        self._queue[(part.topic, part.partition)] = (part, new_isr)
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
            batch, self._queue = self._queue, {}
            if not batch:
                continue
            try:
                response = await self._send(batch)
            except SEND_ERRORS as e:
                log.info("AlterPartition to the controller failed (%s: %s); will propose "
                         "again", type(e).__name__, e)
                for part, _isr in batch.values():
                    part.isr_change_pending = False
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            self._apply(batch, response)

    async def _send(self, batch: dict[tuple[str, int], tuple[Partition, list[int]]]
                    ) -> dict[str, Any]:
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
        for (topic, p), (part, isr) in batch.items():
            topics.setdefault(topic, []).append({
                "partition_index": p, "leader_epoch": part.leader_epoch, "new_isr": isr,
                "leader_recovery_state": 0, "partition_epoch": part.partition_epoch})
        body = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch(),
                "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}
        return await conn.request(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, body,
                                  REQUEST_TIMEOUT_S)

    def _apply(self, batch: dict[tuple[str, int], tuple[Partition, list[int]]],
               response: dict[str, Any]) -> None:
        answered: set[tuple[str, int]] = set()
        if response.get("error_code"):
            log.info("AlterPartition refused: %s", ErrorCode(response["error_code"]).name)
        for t in response.get("topics") or []:
            for r in t["partitions"]:
                key = (t["topic_name"], r["partition_index"])
                entry = batch.get(key)
                if entry is None:
                    continue
                answered.add(key)
                part = entry[0]
                if r["error_code"] != ErrorCode.NONE:
                    log.info("%s: ISR change to %s refused: %s", part, entry[1],
                             ErrorCode(r["error_code"]).name)
                    part.isr_change_pending = False
                    continue
                if r["leader_epoch"] != part.leader_epoch:
                    part.isr_change_pending = False
                    continue
                log.info("%s: ISR is now %s", part, r["isr"])
                if part.set_isr(list(r["isr"]), r["partition_epoch"]):
                    self.on_changed(part)
        for key, (part, _isr) in batch.items():
            if key not in answered:
                part.isr_change_pending = False
