"""InitProducerId (key 22); the ids come from kafkactl.broker.producer_id_manager.

Without a transactional id: an idempotent producer (IdempotentWrite on the cluster, or Write
on a topic). With one: the transaction coordinator (Write on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) gives the id's producer id and its next epoch,
fencing older producers of it (KIP-98), or bumps the epoch of the producer's own id and
epoch (v3+, KIP-360). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkactl.broker.eager import eager
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.checks import authorize, authorize_idempotent_write
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

MAX_EPOCH = 32767
PRODUCER_FENCED_VERSION = 4
log = logging.getLogger(__name__)


def _answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid,
            "producer_epoch": epoch}


async def _transactional(services: BrokerServices, ctx: RequestContext, txn_id: str,
                         request: dict[str, Any], expected: tuple[int, int] | None
                         ) -> dict[str, Any]:
    r = await services.txn_coordinator.init_producer_id(
        txn_id, request.get("transaction_timeout_ms", 0), expected)
    code = r.error
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return _answer(code, r.producer_id, r.producer_epoch)


def handle_init_producer_id(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]) -> Any:
    txn_id = request.get("transactional_id")
    pid, epoch = request.get("producer_id", -1), request.get("producer_epoch", -1)
    if (pid < 0) != (epoch < 0):  # one without the other (Kafka: INVALID_REQUEST)
        return _answer(ErrorCode.INVALID_REQUEST)
    if txn_id is not None:
        if not authorize(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         txn_id):
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return eager(_transactional(services, ctx, txn_id, request,
                                    (pid, epoch) if pid >= 0 else None))
    if not authorize_idempotent_write(services, ctx):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH:
        # KIP-360 epoch bump of an existing idempotent producer.
        return _answer(ErrorCode.NONE, pid, epoch + 1)
    try:
        new_id = services.producer_ids.next_id()
    except Exception as e:  # a cluster's block from ZooKeeper, which is away: retriable
        log.warning("cannot allocate a producer id: %s: %s", type(e).__name__, e)
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _answer(ErrorCode.NONE, new_id, 0)
