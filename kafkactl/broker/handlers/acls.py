"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

With an authorizer (`authorizer.class.name`), they read and change its bindings:
DescribeAcls needs Describe on the cluster, CreateAcls and DeleteAcls Alter
(CLUSTER_AUTHORIZATION_FAILED otherwise); a binding or filter Kafka would refuse (unknown
operation, ANY in a binding, a cluster not named kafka-cluster...) gets INVALID_REQUEST and
nothing is written. Without one, as Kafka does, every ACL request is answered
SECURITY_DISABLED with a well-formed response: a client that calls these APIs without
checking ApiVersions first (Sarama's ClusterAdmin) gets a clear error and keeps its
connection for the next call.
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security import store_writes
from kafkactl.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
)
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(f: dict[str, Any], prefix: str = "") -> AclBindingFilter:
    return AclBindingFilter(
        f[f"resource_type{prefix}"], f[f"resource_name{prefix}"],
        f.get(f"pattern_type{prefix}", PatternType.LITERAL), f["principal_filter"],
        f["host_filter"], f["operation"], f["permission_type"])


def _description(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in sorted(bindings, key=lambda b: (b.resource_type, b.resource_name, b.principal,
                                             b.operation, b.permission_type)):
        by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission_type})
    return [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in by_resource.items()]


def handle_describe_acls(services: BrokerServices, ctx: RequestContext,
                         request: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                           "resources": []}
    authorizer = services.authorizer
    if authorizer is None:
        out.update(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        return out
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE):
        out.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message="Authorization failed.")
        return out
    flt = _filter(request, "_filter")
    try:
        flt.validate()
    except InvalidAcl as e:
        out.update(error_code=ErrorCode.INVALID_REQUEST, error_message=str(e))
        return out
    out["resources"] = _description(authorizer.describe(flt))
    return out


async def handle_create_acls(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    authorizer = services.authorizer
    if authorizer is None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
            for _ in request["creations"]]}
    if not authorize_cluster(services, ctx, AclOperation.ALTER):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": "Authorization failed."} for _ in request["creations"]]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in request["creations"]:
        try:
            valid.append(AclBinding.create(
                c["resource_type"], c["resource_name"],
                c.get("resource_pattern_type", PatternType.LITERAL), c["principal"],
                c["host"], c["operation"], c["permission_type"]))
            results.append({"error_code": 0, "error_message": None})
        except InvalidAcl as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
    if valid:
        await store_writes.write(authorizer.create, valid)
    return {"throttle_time_ms": 0, "results": results}


async def handle_delete_acls(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    authorizer = services.authorizer
    if authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
             "matching_acls": []} for _ in request["filters"]]}
    if not authorize_cluster(services, ctx, AclOperation.ALTER):
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": "Authorization failed.", "matching_acls": []}
            for _ in request["filters"]]}
    filters: list[AclBindingFilter] = []
    errors: dict[int, str] = {}
    for i, f in enumerate(request["filters"]):
        flt = _filter(f, "_filter")
        try:
            flt.validate()
            filters.append(flt)
        except InvalidAcl as e:
            errors[i] = str(e)
    removed = iter(await store_writes.write(authorizer.delete, filters))
    results = []
    for i in range(len(request["filters"])):
        if i in errors:
            results.append({"error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": errors[i], "matching_acls": []})
            continue
        results.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": b.resource_type,
             "resource_name": b.resource_name, "pattern_type": b.pattern_type,
             "principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission_type} for b in next(removed)]})
    return {"throttle_time_ms": 0, "filter_results": results}
