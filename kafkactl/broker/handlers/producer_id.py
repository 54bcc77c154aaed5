"""InitProducerId (key 22); the ids come from kafkactl.broker.producer_id_manager.

Transactions are not supported: a transactional id is refused, here and in
FindCoordinator (key type 1), with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the one
non-retriable answer that aiokafka, kafka-python, librdkafka and kafkajs all surface at once
(COORDINATOR_NOT_AVAILABLE made each of them retry until its timeout; UNSUPPORTED_VERSION
and INVALID_REQUEST still make librdkafka's init_transactions retry).
"""

from __future__ import annotations

import logging
from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.checks import authorize_idempotent_write
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

TRANSACTIONS_UNSUPPORTED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TRANSACTIONS_MESSAGE = ("transactions are not supported by this broker (kafkactl); use an "
                        "idempotent producer without transactional.id")
MAX_EPOCH = 32767
log = logging.getLogger(__name__)


def handle_init_producer_id(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]) -> dict[str, Any]:
    if request.get("transactional_id") is not None:
        return {"throttle_time_ms": 0, "error_code": TRANSACTIONS_UNSUPPORTED,
                "producer_id": -1, "producer_epoch": -1}
    if not authorize_idempotent_write(services, ctx):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    pid, epoch = request.get("producer_id", -1), request.get("producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH:
        # KIP-360 epoch bump of an existing idempotent producer.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid,
                "producer_epoch": epoch + 1}
    try:
        new_id = services.producer_ids.next_id()
    except Exception as e:  # a cluster's block from ZooKeeper, which is away: retriable
        log.warning("cannot allocate a producer id: %s: %s", type(e).__name__, e)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "producer_id": new_id, "producer_epoch": 0}
