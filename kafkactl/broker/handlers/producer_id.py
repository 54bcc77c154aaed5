"""InitProducerId (key 22) and the standalone ProducerIdManager.

Producer ids come in blocks of 1000; the next block's start is persisted in the data dir
(`producer-id-block`, fsynced) before any id from the block is handed out, so ids are never
reused across restarts. Transactions are not supported: a transactional id is refused, here
and in FindCoordinator (key type 1), with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the one
non-retriable answer that aiokafka, kafka-python, librdkafka and kafkajs all surface at once
(COORDINATOR_NOT_AVAILABLE made each of them retry until its timeout; UNSUPPORTED_VERSION
and INVALID_REQUEST still make librdkafka's init_transactions retry).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

TRANSACTIONS_UNSUPPORTED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TRANSACTIONS_MESSAGE = ("transactions are not supported by this broker (kafkactl); use an "
                        "idempotent producer without transactional.id")
BLOCK_SIZE = 1000
MAX_EPOCH = 32767


class ProducerIdManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        start = 0
        try:
            start = int(path.read_text().strip() or 0)
        except (OSError, ValueError):
            start = 0
        self._next = start
        self._block_end = start

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(f"{self._block_end}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        pid = self._next
        self._next += 1
        return pid


def handle_init_producer_id(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("transactional_id") is not None:
        return {"throttle_time_ms": 0, "error_code": TRANSACTIONS_UNSUPPORTED,
                "producer_id": -1, "producer_epoch": -1}
    pid, epoch = request.get("producer_id", -1), request.get("producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH:
        # KIP-360 epoch bump of an existing idempotent producer.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid,
                "producer_epoch": epoch + 1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "producer_id": apis.server.producer_ids.next_id(), "producer_epoch": 0}


def register(apis: Any) -> None:
    apis.register(ApiKey.INIT_PRODUCER_ID, handle_init_producer_id)
