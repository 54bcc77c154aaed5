"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46):
served by the controller of a ZooKeeper cluster (others answer NOT_CONTROLLER, as Kafka's
brokers do; admin clients send them to the Metadata response's controller). A standalone
broker is its own controller and the only replica: every preferred leader already leads,
and the only possible assignment is itself."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster.controller import KafkaController, NotControllerError
from kafkactl.protocol.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1
TopicPartition = tuple[str, int]


def _controller(services: BrokerServices) -> KafkaController | None:
    cluster = services.cluster
    return cluster.controller if cluster is not None else None


def _known(services: BrokerServices, topic: str, p: int) -> bool:
    return services.metadata_cache.partition(topic, p) is not None


async def handle_elect_leaders(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.ALTER):
        return _election_response({}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = request.get("topic_partitions")
    partitions = None if wanted is None else [
        (t["topic"], p) for t in wanted for p in t["partitions"]]
    if request.get("election_type", PREFERRED) != PREFERRED:
        outcome = {tp: (ErrorCode.INVALID_REQUEST,
                        "unclean elections happen only through "
                        "unclean.leader.election.enable") for tp in partitions or []}
        return _election_response(outcome, ErrorCode.NONE)
    controller = _controller(services)
    if controller is None:  # standalone: this broker is every preferred leader
        names = partitions if partitions is not None else [
            (t, p) for t in services.metadata_cache.topic_names()
            for p in services.metadata_cache.topic(t).partitions]  # type: ignore[union-attr]
        outcome = {tp: (ErrorCode.ELECTION_NOT_NEEDED, "") if _known(services, *tp) else
                   (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
                   for tp in names}
        return _election_response(outcome, ErrorCode.NONE)
    if not controller.active:
        return _election_response({}, ErrorCode.NOT_CONTROLLER)
    try:
        outcome = await controller.request("elect_leaders", (partitions,))
    except NotControllerError:
        return _election_response({}, ErrorCode.NOT_CONTROLLER)
    return _election_response(outcome, ErrorCode.NONE)


def _election_response(outcome: dict[TopicPartition, tuple[ErrorCode, str]],
                       error: ErrorCode) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), (code, why) in sorted(outcome.items()):
        topics.setdefault(t, []).append({"partition_id": p, "error_code": code,
                                         "error_message": why or None})
    return {"throttle_time_ms": 0, "error_code": error, "replica_election_results": [
        {"topic": t, "partition_result": ps} for t, ps in topics.items()]}


async def handle_alter_partition_reassignments(services: BrokerServices, ctx: RequestContext,
                                               request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.ALTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Alter on the cluster is needed", "responses": []}
    targets = {(t["name"], p["partition_index"]): p["replicas"]
               for t in request["topics"] for p in t["partitions"]}
    controller = _controller(services)
    outcome: dict[TopicPartition, tuple[ErrorCode, str]]
    if controller is None:
        me = services.broker_id
        outcome = {}
        for tp, target in targets.items():
            if not _known(services, *tp):
                outcome[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
            elif target is None:
                outcome[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "nothing to cancel")
            elif target != [me]:
                outcome[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"this cluster has one broker, id {me}")
            else:
                outcome[tp] = (ErrorCode.NONE, "")
    elif not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "send it to the controller", "responses": []}
    else:
        try:
            outcome = await controller.request("reassign", (targets,))
        except NotControllerError:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                    "error_message": "send it to the controller", "responses": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), (code, why) in sorted(outcome.items()):
        topics.setdefault(t, []).append({"partition_index": p, "error_code": code,
                                         "error_message": why or None})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def handle_list_partition_reassignments(services: BrokerServices, ctx: RequestContext,
                                        request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Describe on the cluster is needed", "topics": []}
    controller = _controller(services)
    if controller is not None and not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "send it to the controller", "topics": []}
    wanted = request.get("topics")
    keep = None if wanted is None else {
        (t["name"], p) for t in wanted for p in t["partition_indexes"]}
    ongoing = controller.reassignments if controller is not None else {}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), r in sorted(ongoing.items()):
        if keep is not None and (t, p) not in keep:
            continue
        replicas = list(dict.fromkeys([*r.target, *r.original]))
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas,
                                         "adding_replicas": r.adding,
                                         "removing_replicas": r.removing})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
