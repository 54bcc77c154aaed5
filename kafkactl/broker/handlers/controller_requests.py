"""What the controller tells a broker (ZooKeeper mode): LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6); and what brokers ask the controller: ControlledShutdown (7) when one
stops, AlterPartition (56) when a leader's ISR changes.

Every request carries the controller's epoch (older ones are refused, so a deposed
controller cannot undo its successor's decisions) and the broker epoch it was meant for. A
standalone broker has no controller and answers STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.partition import Partition
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster.controller import NotControllerError
from kafkactl.cluster.controller_admin import IsrChange
from kafkactl.log.errors import LogError
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

YIELD_EVERY = 4  # partitions made between two turns of the event loop
FIRST_FETCH_POLL_S = 0.02  # a new leader's check that its in-sync followers have fetched
FIRST_FETCH_WAIT_S = 1.0  # ... for at most this long (a follower may be slow or gone)
_background: set[asyncio.Task[None]] = set()
PREPARE_OFF_LOOP = 32  # new partitions in one LeaderAndIsr whose files a worker thread makes
PREPARE_CHUNK = 32
FREEZE_AFTER = 100  # partitions made in one LeaderAndIsr after which the GC freezes


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
    assert services.cluster is not None
    store = services.partitions
    coordinator = services.group_coordinator
    made = 0
    now_ms = time.time() * 1000
    topics = []
    new_terms: list[Partition] = []
    for t in request["topic_states"]:
        name = t["topic_name"]
        await services.cluster.load_topic_config(name)
        await _prepare_new_logs(services, name, t["partition_states"])
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
                    if _take_role(services, part, ps, now_ms):
                        new_terms.append(part)
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
    if new_terms:
        task = asyncio.get_running_loop().create_task(_hurry_followers(services, new_terms))
        _background.add(task)
        task.add_done_callback(_background.discard)
    if made >= FREEZE_AFTER:
        # thousands of long-lived objects: out of the cyclic GC's sight, as at start-up
        # (KafkaServer.startup), so full collections stay short
        gc.freeze()
    return {"error_code": ErrorCode.NONE, "partition_errors": [], "topics": topics}


async def _prepare_new_logs(services: BrokerServices, name: str,
                            states: list[dict[str, Any]]) -> None:
    """Make the files of the partitions this LeaderAndIsr adds on a worker thread, a chunk
    at a time, when there are many (a topic of thousands of partitions): a slow mkdir or
    open blocks the thread, not the produce and fetch requests on the event loop. A chunk
    that fails is left to make_partition, which reports each partition's error."""
    store = services.partitions
    new = [ps["partition_index"] for ps in states
           if store.get_partition(name, ps["partition_index"]) is None]
    if len(new) < PREPARE_OFF_LOOP:
        return
    config = store.configs.for_topic(name)
    for first in range(0, len(new), PREPARE_CHUNK):
        try:
            await asyncio.to_thread(store.prepare_logs, name, new[first:first + PREPARE_CHUNK],
                                    config)
        except (OSError, LogError):
            return


def _take_role(services: BrokerServices, part: Partition, ps: dict[str, Any],
               now_ms: float) -> bool:
    """Lead or follow as the controller says; a leader that becomes a follower fails its
    waiting acks=all produces and wakes its long polls. True: a new leader term began
    here."""
    assert services.cluster is not None
    me, key = services.broker_id, (part.topic, part.partition)
    fetchers = services.cluster.fetchers
    was_leader = part.is_leader
    if ps["leader"] == me:
        new_term = not was_leader or ps["leader_epoch"] != part.leader_epoch
        fetchers.unfollow(key)
        part.become_leader(me, ps["leader_epoch"], ps["isr"], ps["replicas"],
                           ps["partition_epoch"], now_ms)
        if part.maybe_advance_high_watermark():
            services.replica_manager.high_watermark_moved(part)
        return new_term
    part.become_follower(me, ps["leader"], ps["leader_epoch"], ps["isr"], ps["replicas"],
                         ps["partition_epoch"])
    if was_leader:
        services.replica_manager.produce_purgatory.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        services.fetch_purgatory.wake(key)
    if ps["leader"] >= 0:
        fetchers.follow(part)
    else:
        fetchers.unfollow(key)
    return False


def _unheard(part: Partition) -> set[int]:
    """In-sync followers that have not fetched since this leader's term began."""
    return {r for r in part.isr if r != part.local_id
            and (f := part.followers.get(r)) is not None and f.log_end_offset < 0}


async def _hurry_followers(services: BrokerServices, parts: list[Partition]) -> None:
    """A follower's fetcher parks one fetch at a time here, for up to
    replica.fetch.wait.max.ms; a partition it must now fetch from this leader (or fetch
    again in the new term) joins only its next fetch, and until then the high watermark,
    and with it every acks=all write, waits. So end the parked fetches on the partitions
    led here that those followers replicate, until each has fetched (at most
    FIRST_FETCH_WAIT_S: a follower may be slow to hear of its new leader, or gone)."""
    deadline = time.monotonic() + FIRST_FETCH_WAIT_S
    followers = {r for part in parts for r in _unheard(part)}
    led = [(key, set(p.replicas) & followers) for key, p in services.partitions.partitions.items()
           if p.is_leader and followers.intersection(p.replicas)]
    while time.monotonic() < deadline:
        waiting = {r for part in parts if part.is_leader for r in _unheard(part)}
        if not waiting:
            return
        for key, replicas in led:
            if waiting & replicas:
                services.fetch_purgatory.wake(key)
        await asyncio.sleep(FIRST_FETCH_POLL_S)


def handle_update_metadata(services: BrokerServices, ctx: RequestContext,
                           request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, ctx, request)
    if code == ErrorCode.NONE:
        assert services.cluster is not None
        services.cluster.cache.apply_update_metadata(request)
    return {"error_code": code}


def handle_stop_replica(services: BrokerServices, ctx: RequestContext,
                        request: dict[str, Any]) -> dict[str, Any]:
    code = _fenced(services, ctx, request)
    if code != ErrorCode.NONE:
        return {"error_code": code, "partition_errors": []}
    assert services.cluster is not None
    store = services.partitions
    errors = []
    for t in request.get("topic_states") or []:
        name = t["topic_name"]
        for ps in t["partition_states"]:
            p = ps["partition_index"]
            error = ErrorCode.NONE
            if name == OFFSETS_TOPIC:
                services.group_coordinator.resigned(p)
            services.cluster.fetchers.unfollow((name, p))
            services.replica_manager.produce_purgatory.fail((name, p),
                                                            ErrorCode.NOT_LEADER_OR_FOLLOWER)
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
