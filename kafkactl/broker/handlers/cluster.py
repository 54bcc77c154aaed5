"""DescribeCluster (key 60) and FindCoordinator (key 10).

FindCoordinator answers "this broker" for every key: a standalone broker coordinates every
group. It is also what librdkafka 2.0.2 looks for before it turns on lz4 and groups. The
group APIs themselves (JoinGroup...) are registered by the GroupCoordinator when it lands.
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.handlers.acls import CLUSTER_OPERATIONS, authorized_operations
from kafkactl.broker.handlers.producer_id import TRANSACTIONS_MESSAGE, TRANSACTIONS_UNSUPPORTED
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

GROUP, TRANSACTION = 0, 1


def handle_describe_cluster(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    cache = apis.server.cache
    return {
        "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
        "endpoint_type": request.get("endpoint_type", 1), "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id(),
        "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in cache.brokers()],
        "cluster_authorized_operations": authorized_operations(
            CLUSTER_OPERATIONS, bool(request.get("include_cluster_authorized_operations"))),
    }


def handle_find_coordinator(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    cache = apis.server.cache
    me = next(b for b in cache.brokers() if b.node_id == cache.broker_id)
    key_type = request.get("key_type", GROUP)

    def answer(key: str) -> dict[str, Any]:
        if key_type != GROUP:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": TRANSACTIONS_UNSUPPORTED,
                    "error_message": TRANSACTIONS_MESSAGE}
        return {"key": key, "node_id": me.node_id, "host": me.host, "port": me.port,
                "error_code": ErrorCode.NONE, "error_message": None}

    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [answer(k) for k in request.get("coordinator_keys", [])]}
    single = answer(request.get("key", ""))
    single.pop("key")
    return {"throttle_time_ms": 0, **single}


def register(apis: Any) -> None:
    apis.register(ApiKey.DESCRIBE_CLUSTER, handle_describe_cluster)
    apis.register(ApiKey.FIND_COORDINATOR, handle_find_coordinator)
