"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) without an authorizer.

This broker has no authorizer (`authorizer.class.name` is unset), so, as Kafka does in
that case, every ACL request is answered SECURITY_DISABLED with a well-formed response:
a client that calls these APIs without checking ApiVersions first (Sarama's ClusterAdmin)
gets a clear error and keeps its connection for the next call.
"""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def handle_describe_acls(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED,
            "error_message": NO_AUTHORIZER, "resources": []}


def handle_create_acls(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
        for _ in request["creations"]]}


def handle_delete_acls(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
         "matching_acls": []} for _ in request["filters"]]}


def register(apis: Any) -> None:
    apis.register(ApiKey.DESCRIBE_ACLS, handle_describe_acls)
    apis.register(ApiKey.CREATE_ACLS, handle_create_acls)
    apis.register(ApiKey.DELETE_ACLS, handle_delete_acls)
