"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46):
served by the controller of a ZooKeeper cluster (others answer NOT_CONTROLLER, as Kafka's
brokers do; admin clients send them to the Metadata response's controller). A standalone
broker is its own controller and the only replica: it leads every partition it can (a
preferred or unclean election is not needed), a partition in an offline log dir has no
replica to elect, and the only possible assignment is itself.

As Kafka's KafkaApis.handleElectLeaders, ElectLeaders' NOT_CONTROLLER is said per
partition (top-level error NONE; for a request of all partitions, each partition this
broker's metadata has), and a request of all partitions (topic_partitions null) leaves out
those whose election was not needed (ELECTION_NOT_NEEDED): Java's
electLeaders(type, null).all() would fail on a healthy cluster otherwise."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster.controller import KafkaController, NotControllerError
from kafkactl.cluster.partition_election import ELECTION_NOT_NEEDED_MESSAGE, ElectionType
from kafkactl.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
Outcome = dict[TopicPartition, tuple[ErrorCode, str]]


def _controller(services: BrokerServices) -> KafkaController | None:
    cluster = services.cluster
    return cluster.controller if cluster is not None else None


def _known(services: BrokerServices, topic: str, p: int) -> bool:
    return services.metadata_cache.partition(topic, p) is not None


async def handle_elect_leaders(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    wanted = request.get("topic_partitions")
    partitions = None if wanted is None else [
        (t["topic"], p) for t in wanted for p in t["partitions"]]
    if not authorize_cluster(services, ctx, AclOperation.ALTER):
        # as Kafka: the error at the top and for each partition named
        return _election_response(
            {tp: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "") for tp in partitions or []},
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        election = ElectionType(request.get("election_type", ElectionType.PREFERRED))
    except ValueError:
        outcome = {tp: (ErrorCode.INVALID_REQUEST,
                        f"unknown election type {request.get('election_type')}")
                   for tp in partitions or []}
        return _election_response(outcome, ErrorCode.NONE)
    controller = _controller(services)
    if controller is None:
        outcome = _standalone_elections(services, partitions, election)
    elif not controller.active:
        outcome = _not_controller(services, partitions)
    else:
        try:
            outcome = await controller.request("elect_leaders", (partitions, election))
        except NotControllerError:
            outcome = _not_controller(services, partitions)
    if partitions is None:  # all partitions: only those elected or failed
        outcome = {tp: r for tp, r in outcome.items()
                   if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    return _election_response(outcome, ErrorCode.NONE)


def _all_partitions(services: BrokerServices) -> list[TopicPartition]:
    cache = services.metadata_cache
    return [(t, p) for t in cache.topic_names() if (meta := cache.topic(t)) is not None
            for p in meta.partitions]


def _not_controller(services: BrokerServices, partitions: list[TopicPartition] | None
                    ) -> Outcome:
    """NOT_CONTROLLER for each partition asked for (None: each one this broker knows), as
    a ZooKeeper-mode Kafka broker answers ElectLeaders when it is not the controller."""
    controller_id = services.metadata_cache.controller_id()
    why = f"broker {services.broker_id} is not the controller" + (
        f" (broker {controller_id} is)" if controller_id not in (-1, services.broker_id)
        else "")
    return {tp: (ErrorCode.NOT_CONTROLLER, why)
            for tp in (partitions if partitions is not None else _all_partitions(services))}


def _standalone_elections(services: BrokerServices, partitions: list[TopicPartition] | None,
                          election: ElectionType) -> Outcome:
    """A standalone broker is the only (and so the preferred) replica of every partition:
    a partition it leads needs no election of either type; one without a leader (its log
    dir is offline) has no replica that could lead."""
    cache = services.metadata_cache
    names = partitions if partitions is not None else _all_partitions(services)
    outcome: Outcome = {}
    for t, p in names:
        meta = cache.partition(t, p)
        if meta is None:
            outcome[(t, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
        elif meta.leader >= 0:
            outcome[(t, p)] = (ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
        elif election == ElectionType.UNCLEAN:
            outcome[(t, p)] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                               f"no replica of {t}-{p} is live with its log dir online "
                               f"(replicas {services.broker_id})")
        else:
            outcome[(t, p)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                               f"preferred replica {services.broker_id} is not live and in "
                               "the ISR")
    return outcome


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
