"""Group membership APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Thin adapters: decode the version-specific request shape, call the GroupCoordinator, encode
the answer. JoinGroup and SyncGroup park until the rebalance completes (asyncio futures).
With an authorizer (GROUP_AUTHORIZATION_FAILED otherwise): FindCoordinator and
DescribeGroups need Describe on the group, Join/Sync/Heartbeat/Leave need Read, DeleteGroups
Delete; ListGroups lists the groups the principal may Describe (all with cluster Describe).
FindCoordinator key type 1 finds a transactional id's coordinator (the leader of its
__transaction_state partition; Describe on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the first one creates that topic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafkactl.broker.advertised import listener_endpoint
from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator
from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.coordinator.transaction_coordinator import TransactionCoordinator
from kafkactl.broker.coordinator.transaction_state_manager import TXN_TOPIC
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.authorizer import java_host_address
from kafkactl.broker.security.checks import (
    authorize,
    authorize_cluster,
    authorize_group,
    authorized_operations,
)
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _client_host(ctx: RequestContext) -> str:
    """A member's host as Kafka's coordinator gives it: "/" and the client's address in
    Java's form (an IPv6 one uncompressed; it was the address with the port)."""
    host = getattr(ctx.connection, "client_host", "")
    if not host:
        peer = str(ctx.connection.peer or "")
        host = peer.rsplit(":", 1)[0].strip("[]") if peer else ""
    return "/" + java_host_address(host)


def _may_describe(services: BrokerServices, ctx: RequestContext, key: str,
                  key_type: int) -> bool:
    if key_type == TRANSACTION_KEY_TYPE:
        return authorize(services, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         key)
    return authorize_group(services, ctx, AclOperation.DESCRIBE, key)


def _find_one(services: BrokerServices, ctx: RequestContext, key: str | None,
              key_type: int, no_topic: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key or "", "node_id": -1, "host": "", "port": -1,
                             "error_code": ErrorCode.NONE, "error_message": None}
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        entry["error_code"] = ErrorCode.INVALID_REQUEST
        return entry
    if key is not None and not _may_describe(services, ctx, key, key_type):
        entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED \
            if key_type == GROUP_KEY_TYPE else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return entry
    coordinator: GroupCoordinator | TransactionCoordinator = \
        services.group_coordinator if key_type == GROUP_KEY_TYPE else services.txn_coordinator
    if key is None or not coordinator.active or \
            (key_type == TRANSACTION_KEY_TYPE and key == ""):
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE if key
                     else ErrorCode.INVALID_REQUEST)
        return entry
    if no_topic is not None:  # the internal topic cannot be created
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=no_topic)
        return entry
    partition = coordinator.coordinator_for(key)
    cache = services.metadata_cache
    meta = cache.partition(OFFSETS_TOPIC if key_type == GROUP_KEY_TYPE else TXN_TOPIC,
                           partition)
    broker = next((b for b in cache.brokers() if meta is not None and b.node_id == meta.leader),
                  None)
    endpoint = None if broker is None else listener_endpoint(services, ctx, broker)
    if broker is None or endpoint is None:  # no leader, or not on this listener (Kafka's
        entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE  # answer too)
        return entry
    host, port = endpoint
    entry.update(node_id=broker.node_id, host=host, port=port)
    return entry


def handle_find_coordinator(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]
                            ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    keys = request.get("coordinator_keys") or () if ctx.api_version >= 4 else \
        [request.get("key")]
    key_type = request.get("key_type", 0)
    if key_type == GROUP_KEY_TYPE:
        coordinator: GroupCoordinator | TransactionCoordinator = services.group_coordinator
        manager: Any = services.group_coordinator.manager
    elif key_type == TRANSACTION_KEY_TYPE:
        coordinator = services.txn_coordinator
        manager = services.txn_coordinator.manager
    else:
        return _find(services, ctx, request, None)
    if coordinator.active and not manager.topic_exists() and any(
            k and _may_describe(services, ctx, k, key_type) for k in keys):
        return _create_topic_then_find(services, ctx, request, manager.ensure_topic)
    return _find(services, ctx, request, None)


async def _create_topic_then_find(services: BrokerServices, ctx: RequestContext,
                                  request: dict[str, Any],
                                  ensure_topic: Callable[[], None]) -> dict[str, Any]:
    """The first FindCoordinator creates __consumer_offsets (or __transaction_state); in a
    cluster that waits on ZooKeeper, on the topic admin's threads (`TopicAdmin.call`), not
    on the event loop."""
    admin = services.topic_admin
    try:
        await admin.call(ensure_topic, timeout_s=0)
    except Exception as e:  # noqa: BLE001 - every client of the group is told, and retries
        return _find(services, ctx, request, str(e))
    return _find(services, ctx, request, None)


def _find(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
          no_topic: str | None) -> dict[str, Any]:
    key_type = request.get("key_type", 0)
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            _find_one(services, ctx, k, key_type, no_topic)
            for k in request.get("coordinator_keys") or ()]}
    one = _find_one(services, ctx, request.get("key"), key_type, no_topic)
    one.pop("key")
    return {"throttle_time_ms": 0, **one}


async def handle_join_group(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]) -> dict[str, Any]:
    v = ctx.api_version
    if not authorize_group(services, ctx, AclOperation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "generation_id": -1, "protocol_type": None,
                "protocol_name": None if v >= 7 else "", "leader": "",
                "member_id": request["member_id"] or "", "members": []}
    r = await services.group_coordinator.join_group(
        request["group_id"], request["member_id"] or "", request.get("group_instance_id"),
        v >= 4, ctx.client_id or "", _client_host(ctx),
        request.get("rebalance_timeout_ms", -1), request["session_timeout_ms"],
        request["protocol_type"],
        [(p["name"], bytes(p["metadata"] or b"")) for p in request.get("protocols") or ()])
    return {
        "throttle_time_ms": 0, "error_code": r.error, "generation_id": r.generation_id,
        "protocol_type": r.protocol_type if r.error == ErrorCode.NONE else None,
        "protocol_name": r.protocol_name if r.protocol_name is not None or v >= 7 else "",
        "leader": r.leader_id, "member_id": r.member_id,
        "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta}
                    for mid, iid, meta in r.members or ()],
    }


async def handle_sync_group(services: BrokerServices, ctx: RequestContext,
                            request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_group(services, ctx, AclOperation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    r = await services.group_coordinator.sync_group(
        request["group_id"], request["generation_id"], request["member_id"],
        request.get("group_instance_id"), request.get("protocol_type"),
        request.get("protocol_name"),
        {a["member_id"]: bytes(a["assignment"] or b"") for a in request.get("assignments") or ()})
    ok = r.error == ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": r.error,
            "protocol_type": r.protocol_type if ok else None,
            "protocol_name": r.protocol_name if ok else None,
            "assignment": r.assignment if ok else b""}


def handle_heartbeat(services: BrokerServices, ctx: RequestContext,
                     request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_group(services, ctx, AclOperation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    code = services.group_coordinator.heartbeat(request["group_id"], request["generation_id"],
                                        request["member_id"], request.get("group_instance_id"))
    return {"throttle_time_ms": 0, "error_code": code}


def handle_leave_group(services: BrokerServices, ctx: RequestContext,
                       request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_group(services, ctx, AclOperation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "members": []}
    if ctx.api_version >= 3:
        members = [(m["member_id"] or "", m.get("group_instance_id"))
                   for m in request.get("members") or ()]
    else:
        members = [(request["member_id"] or "", None)]
    code, results = services.group_coordinator.leave_group(request["group_id"], members)
    if ctx.api_version < 3:
        if code == ErrorCode.NONE and results:
            code = results[0]
        return {"throttle_time_ms": 0, "error_code": code}
    return {"throttle_time_ms": 0, "error_code": code, "members": [
        {"member_id": mid, "group_instance_id": iid, "error_code": err}
        for (mid, iid), err in zip(members, results, strict=False)]}


def describe_group_entry(coordinator: GroupCoordinator, group_id: str) -> dict[str, Any]:
    from kafkactl.broker.coordinator.group import GroupState

    code, group = coordinator.describe(group_id)
    entry: dict[str, Any] = {"error_code": code, "group_id": group_id, "group_state": "Dead",
                             "protocol_type": "", "protocol_data": "", "members": []}
    if code != ErrorCode.NONE or group is None:
        return entry
    stable = group.is_(GroupState.STABLE)
    entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                 protocol_data=group.protocol_name or "" if stable else "")
    entry["members"] = [{
        "member_id": m.member_id, "group_instance_id": m.group_instance_id,
        "client_id": m.client_id, "client_host": m.client_host,
        "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
        "member_assignment": m.assignment if stable else b"",
    } for m in group.members.values()]
    return entry


def handle_describe_groups(services: BrokerServices, ctx: RequestContext,
                           request: dict[str, Any]) -> dict[str, Any]:
    coordinator = services.group_coordinator
    include = bool(request.get("include_authorized_operations"))
    groups = []
    for g in request.get("groups") or ():
        if authorize_group(services, ctx, AclOperation.DESCRIBE, g):
            entry = describe_group_entry(coordinator, g)
            entry["authorized_operations"] = authorized_operations(
                services, ctx, ResourceType.GROUP, g, include)
        else:  # as Kafka: the error, and the sentinel for the operations
            entry = {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": g,
                     "group_state": "", "protocol_type": "", "protocol_data": "",
                     "members": [], "authorized_operations": authorized_operations(
                         services, ctx, ResourceType.GROUP, g, False)}
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}


def handle_list_groups(services: BrokerServices, ctx: RequestContext,
                       request: dict[str, Any]) -> dict[str, Any]:
    code, groups = services.group_coordinator.list_groups(request.get("states_filter"))
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE, log_if_denied=False):
        groups = [g for g in groups if authorize_group(
            services, ctx, AclOperation.DESCRIBE, g.group_id, log_if_denied=False)]
    return {"throttle_time_ms": 0, "error_code": code, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
         "group_state": g.state.value} for g in groups]}


def handle_delete_groups(services: BrokerServices, ctx: RequestContext,
                         request: dict[str, Any]) -> dict[str, Any]:
    coordinator = services.group_coordinator
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": coordinator.delete_group(g)
         if authorize_group(services, ctx, AclOperation.DELETE, g)
         else ErrorCode.GROUP_AUTHORIZATION_FAILED}
        for g in request.get("groups_names") or ()]}
