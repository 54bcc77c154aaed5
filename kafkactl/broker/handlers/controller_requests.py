"""What the controller tells a broker (ZooKeeper mode): LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6); and ControlledShutdown (7), which a stopping broker sends the controller.

Every request carries the controller's epoch (older ones are refused, so a deposed
controller cannot undo its successor's decisions) and the broker epoch it was meant for. A
standalone broker has no controller and answers STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster.controller import NotControllerError
from kafkactl.log.errors import LogError
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

YIELD_EVERY = 32  # partitions made between two turns of the event loop


def _fenced(services: BrokerServices, request: dict[str, Any]) -> ErrorCode:
    cluster = services.cluster
    if cluster is None:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return cluster.check_controller_request(request["controller_id"],
                                            request["controller_epoch"],
                                            request.get("broker_epoch", -1))


async def handle_leader_and_isr(services: BrokerServices, ctx: RequestContext,
                                request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, request)
    if code != ErrorCode.NONE:
        return {"error_code": code, "partition_errors": [], "topics": []}
    assert services.cluster is not None
    store, me = services.partitions, services.broker_id
    coordinator = services.group_coordinator
    made = 0
    topics = []
    for t in request["topic_states"]:
        name = t["topic_name"]
        await services.cluster.load_topic_config(name)
        errors = []
        for ps in t["partition_states"]:
            p, epoch = ps["partition_index"], ps["leader_epoch"]
            error = ErrorCode.NONE
            part = store.get_partition(name, p)
            if part is not None and epoch < part.leader_epoch:
                error = ErrorCode.STALE_CONTROLLER_EPOCH
            else:
                try:
                    if part is None:
                        part = store.make_partition(name, p, store.configs.for_topic(name),
                                                    epoch)
                        made += 1
                    was_leader = part.is_leader
                    part.leader_epoch = epoch
                    part.is_leader = ps["leader"] == me
                    if was_leader and not part.is_leader:
                        services.fetch_purgatory.wake((name, p))
                    if name == OFFSETS_TOPIC:
                        if part.is_leader:
                            coordinator.elected(p)
                        else:
                            coordinator.resigned(p)
                except (OSError, LogError) as e:
                    log.error("cannot host %s-%d: %s", name, p, e)
                    error = ErrorCode.KAFKA_STORAGE_ERROR
            errors.append({"topic_name": name, "partition_index": p, "error_code": error})
            if made and made % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let produce and fetch requests through
        topics.append({"topic_id": t.get("topic_id"), "partition_errors": errors})
    return {"error_code": ErrorCode.NONE, "partition_errors": [], "topics": topics}


def handle_update_metadata(services: BrokerServices, ctx: RequestContext,
                           request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, request)
    if code == ErrorCode.NONE:
        assert services.cluster is not None
        services.cluster.cache.apply_update_metadata(request)
    return {"error_code": code}


def handle_stop_replica(services: BrokerServices, ctx: RequestContext,
                        request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, request)
    if code != ErrorCode.NONE:
        return {"error_code": code, "partition_errors": []}
    store = services.partitions
    errors = []
    for t in request.get("topic_states") or []:
        name = t["topic_name"]
        for ps in t["partition_states"]:
            p = ps["partition_index"]
            error = ErrorCode.NONE
            if name == OFFSETS_TOPIC:
                services.group_coordinator.resigned(p)
            try:
                if ps["delete_partition"]:
                    store.remove_partition(name, p)
                else:
                    part = store.get_partition(name, p)
                    if part is not None:
                        part.is_leader = False
                        services.fetch_purgatory.wake((name, p))
            except OSError as e:
                log.error("cannot delete the log of %s-%d: %s", name, p, e)
                error = ErrorCode.KAFKA_STORAGE_ERROR
            errors.append({"topic_name": name, "partition_index": p, "error_code": error})
        if not any(tp[0] == name for tp in store.partitions):
            store.forget_topic(name)
    return {"error_code": ErrorCode.NONE, "partition_errors": errors}


async def handle_controlled_shutdown(services: BrokerServices, ctx: RequestContext,
                                     request: dict[str, Any]) -> dict[str, Any]:
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
