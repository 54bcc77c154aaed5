"""DescribeCluster (key 60): the brokers and the controller, from the metadata cache.

FindCoordinator (key 10) is answered with the group APIs (kafkactl.broker.handlers.groups).
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.advertised import brokers_on_listener
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.checks import cluster_authorized_operations
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode


def handle_describe_cluster(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]) -> dict[str, Any]:
    cache = services.metadata_cache
    return {
        "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
        "endpoint_type": request.get("endpoint_type", 1), "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id(),
        "brokers": [{"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b, host, port in brokers_on_listener(services, ctx)],
        # 0 without Describe on the cluster (Kafka's computeDescribeClusterResponse)
        "cluster_authorized_operations": cluster_authorized_operations(
            services, ctx, bool(request.get("include_cluster_authorized_operations"))),
    }
