"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) without an authorizer.

This broker has no authorizer (`authorizer.class.name` is unset), so, as Kafka does in
that case, every ACL request is answered SECURITY_DISABLED with a well-formed response:
a client that calls these APIs without checking ApiVersions first (Sarama's ClusterAdmin)
gets a clear error and keeps its connection for the next call.
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured on the broker"

# AclOperation codes and the operations Kafka supports on each resource type. With no
# authorizer, Kafka reports every supported operation as authorized (a 32-bit field of
# 1 << code); a request that did not ask for them gets AUTHORIZED_OPERATIONS_OMITTED.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
TOPIC_OPERATIONS = (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS,
                    ALTER_CONFIGS)
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE)
CLUSTER_OPERATIONS = (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                      IDEMPOTENT_WRITE, ALTER, DESCRIBE)
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


def authorized_operations(operations: tuple[int, ...], requested: bool) -> int:
    """The bit field a response carries: every supported operation (no authorizer)."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return sum(1 << op for op in set(operations))


def handle_describe_acls(services: BrokerServices, ctx: RequestContext,
                         request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED,
            "error_message": NO_AUTHORIZER, "resources": []}


def handle_create_acls(services: BrokerServices, ctx: RequestContext,
                       request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
        for _ in request["creations"]]}


def handle_delete_acls(services: BrokerServices, ctx: RequestContext,
                       request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
         "matching_acls": []} for _ in request["filters"]]}
