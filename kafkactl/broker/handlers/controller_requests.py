"""What the controller tells a broker (ZooKeeper mode): LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6); and what brokers ask the controller: ControlledShutdown (7) when one
stops, AlterPartition (56) when a leader's ISR changes.

Every request carries the controller's epoch (older ones are refused, so a deposed
controller cannot undo its successor's decisions) and the broker epoch it was meant for;
what LeaderAndIsr and StopReplica then do is kafkactl.broker.replica_state's, the path a
standalone broker's own controller takes in process. A standalone broker takes no such
request over the wire: it answers STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster.controller import NotControllerError
from kafkactl.cluster.controller_admin import IsrChange
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _fenced(services: BrokerServices, ctx: RequestContext,
            request: dict[str, Any]) -> ErrorCode:
    """An error when the request may not be obeyed: a sender without ClusterAction (with
    an authorizer: the brokers' principal must be allowed it, e.g. in super.users), no
    controller here, or an older controller / broker epoch."""
    if not authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    cluster = services.cluster
    if cluster is None:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return cluster.check_controller_request(request["controller_id"],
                                            request["controller_epoch"],
                                            request.get("broker_epoch", -1))


async def handle_leader_and_isr(services: BrokerServices, ctx: RequestContext,
                                request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, ctx, request)
    if code != ErrorCode.NONE:
        return {"error_code": code, "partition_errors": [], "topics": []}
    topics = await services.replica_states.become_leader_or_follower(request["topic_states"])
    return {"error_code": ErrorCode.NONE, "partition_errors": [], "topics": topics}


def handle_update_metadata(services: BrokerServices, ctx: RequestContext,
                           request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, ctx, request)
    if code == ErrorCode.NONE:
        assert services.cluster is not None
        services.cluster.cache.apply_update_metadata(request)
    return {"error_code": code}


async def handle_stop_replica(services: BrokerServices, ctx: RequestContext,
                              request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, ctx, request)
    if code != ErrorCode.NONE:
        return {"error_code": code, "partition_errors": []}
    errors = await services.replica_states.stop_replicas(request.get("topic_states") or [])
    return {"error_code": ErrorCode.NONE, "partition_errors": errors}


async def handle_controlled_shutdown(services: BrokerServices, ctx: RequestContext,
                                     request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "remaining_partitions": []}
    cluster = services.cluster
    if cluster is None or not cluster.controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    try:
        remaining = await cluster.controller.controlled_shutdown(request["broker_id"])
    except NotControllerError as e:
        log.info("controlled shutdown of broker %d refused: %s", request["broker_id"], e)
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    return {"error_code": ErrorCode.NONE, "remaining_partitions": [
        {"topic_name": t, "partition_index": p} for t, p in remaining]}


async def handle_alter_partition(services: BrokerServices, ctx: RequestContext,
                                 request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "topics": []}
    cluster = services.cluster
    if cluster is None or not cluster.controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    changes = [IsrChange(t["topic_name"], p["partition_index"], p["leader_epoch"],
                         list(p["new_isr"]), p["partition_epoch"])
               for t in request["topics"] for p in t["partitions"]]
    try:
        results = await cluster.controller.alter_partition(request["broker_id"], changes)
    except NotControllerError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for change, code, state in results:
        topics.setdefault(change.topic, []).append({
            "partition_index": change.partition, "error_code": code,
            "leader_id": state.leader if state else -1,
            "leader_epoch": state.leader_epoch if state else -1,
            "isr": list(state.isr) if state else [], "leader_recovery_state": 0,
            "partition_epoch": state.zk_version if state else -1})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}
