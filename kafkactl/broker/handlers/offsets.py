"""Committed offsets: OffsetCommit (8), OffsetFetch (9, incl. the v8 batched form and v7's
require_stable: UNSTABLE_OFFSET_COMMIT for a partition a transaction has offsets pending
for) and OffsetDelete (47), answered by the GroupCoordinator's offset manager.

With an authorizer: OffsetCommit needs Read on the group and on each topic, OffsetFetch
Describe on the group and on each topic (unauthorized topics are left out of an "all
topics" answer), OffsetDelete Delete on the group and Read on each topic.

Version 0 of OffsetCommit and OffsetFetch, on a broker of a ZooKeeper cluster, is Kafka's
ZooKeeper-mode v0 (KafkaApis, Kafka 0.8.2-2.x): the offsets live in the seed's
/consumers/GROUP/offsets/TOPIC/PARTITION znodes (the offset as decimal text, nothing else:
a v0 commit's metadata is checked against offset.metadata.max.bytes, then dropped), and no
group coordinator is involved (clients that old find none). Partitions the cluster does
not know get UNKNOWN_TOPIC_OR_PARTITION, as does a v0 fetch of a partition without a
znode (offset -1). On a standalone broker (no ZooKeeper) v0 goes to the group
coordinator, as v1+.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from kafkactl.broker.coordinator.group import OffsetAndMetadata
from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator
from kafkactl.broker.coordinator.offset_manager import OFFSET_METADATA_MAX_BYTES, java_length
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_group, unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.cluster import consumer_registry
from kafkactl.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
ZK_ANSWER_S = 10.0  # how long a v0 request waits for ZooKeeper before it gives up


def handle_offset_commit(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                         ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    if ctx.api_version == 0 and services.cluster is not None:
        return _commit_v0_zookeeper(services, ctx, request)
    coordinator = services.group_coordinator
    v = ctx.api_version
    now = coordinator.now_ms()
    # As Kafka since 2.1 (KIP-211): v1's commit_timestamp is only the commit time (it no
    # longer sets a deadline); v2-v4's retention_time_ms sets an explicit deadline from now;
    # otherwise the group's state decides when offsets expire (see expire_offsets).
    retention = request.get("retention_time_ms", -1) if 2 <= v <= 4 else -1
    expire = now + retention if retention >= 0 else -1
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for t in request.get("topics") or ():
        for p in t.get("partitions") or ():
            ts = p.get("commit_timestamp", -1) if v == 1 else -1
            offsets[(t["name"], p["partition_index"])] = OffsetAndMetadata(
                p["committed_offset"], p.get("committed_leader_epoch", -1),
                p.get("committed_metadata") or "", ts if ts >= 0 else now, expire)
    generation = request.get("generation_id_or_member_epoch", -1) if v >= 1 else -1
    member = (request.get("member_id") or "") if v >= 1 else ""
    denied: dict[tuple[str, int], ErrorCode] = {}
    if not authorize_group(services, ctx, AclOperation.READ, request["group_id"]):
        denied = dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        refused = unauthorized_topics(services, ctx, AclOperation.READ,
                                      (t for t, _p in offsets))
        denied = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets
                  if tp[0] in refused}
    offsets = {tp: o for tp, o in offsets.items() if tp not in denied}
    errors = coordinator.commit_offsets(request["group_id"], generation, member,
                                        request.get("group_instance_id"),
                                        offsets) if offsets or not denied else {}
    return _commit_answer({**errors, **denied})


def _commit_answer(errors: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": parts} for name, parts in topics.items()]}


async def _zookeeper(services: BrokerServices, fn: Any, *args: Any) -> Any:
    """`fn(zk, *args)` on a worker thread (kazoo blocks), given ZK_ANSWER_S to answer."""
    assert services.cluster is not None
    return await asyncio.wait_for(asyncio.to_thread(fn, services.cluster.zk, *args),
                                  ZK_ANSWER_S)


async def _commit_v0_zookeeper(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    """OffsetCommit v0 in a ZooKeeper cluster (Kafka's handleOffsetCommitRequest, v0):
    Read on the group, then per partition Read on its topic, a partition the cluster
    knows, metadata within offset.metadata.max.bytes; the others' offsets are written to
    /consumers/GROUP/offsets/TOPIC/PARTITION. A ZooKeeper failure fails the partitions
    still to write (UNKNOWN_SERVER_ERROR, Kafka's Errors.forException; REQUEST_TIMED_OUT
    when it does not answer in time)."""
    group = request["group_id"]
    wanted: dict[TopicPartition, dict[str, Any]] = {
        (t["name"], p["partition_index"]): p
        for t in request.get("topics") or () for p in t.get("partitions") or ()}
    if not authorize_group(services, ctx, AclOperation.READ, group):
        return _commit_answer(dict.fromkeys(wanted, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    refused = unauthorized_topics(services, ctx, AclOperation.READ, (t for t, _p in wanted))
    max_bytes = services.config.get_int_or("offset.metadata.max.bytes",
                                           OFFSET_METADATA_MAX_BYTES)
    errors: dict[TopicPartition, ErrorCode] = {}
    to_write: list[tuple[TopicPartition, int]] = []
    for tp, p in wanted.items():
        if tp[0] in refused:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif services.metadata_cache.partition(*tp) is None:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif java_length(p.get("committed_metadata") or "") > max_bytes:
            errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            to_write.append((tp, p["committed_offset"]))
    for i, (tp, offset) in enumerate(to_write):
        try:
            await _zookeeper(services, consumer_registry.write_offsets, group, {tp: offset})
            errors[tp] = ErrorCode.NONE
        except Exception as e:  # Kafka: Errors.forException, partition by partition
            code = ErrorCode.REQUEST_TIMED_OUT if isinstance(e, TimeoutError) \
                else ErrorCode.UNKNOWN_SERVER_ERROR
            errors.update((rest, code) for rest, _o in to_write[i:])
            break
    return _commit_answer({tp: errors[tp] for tp in wanted})


def _fetch_group(services: BrokerServices, ctx: RequestContext, group_id: str,
                 topics: list[dict[str, Any]] | None, require_stable: bool = False
                 ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    coordinator: GroupCoordinator = services.group_coordinator
    tps = None if topics is None else [
        (t["name"], p) for t in topics for p in t.get("partition_indexes") or ()]
    unstable: set[tuple[str, int]] = set()
    if not authorize_group(services, ctx, AclOperation.DESCRIBE, group_id):
        code, found = ErrorCode.GROUP_AUTHORIZATION_FAILED, dict[tuple[str, int], Any]()
    else:
        code, found, unstable = coordinator.fetch_offsets(group_id, tps, require_stable)
    if code != ErrorCode.NONE:
        found = {tp: None for tp in tps or ()}
    refused = unauthorized_topics(services, ctx, AclOperation.DESCRIBE,
                                  (t for t, _p in found))
    if refused and code == ErrorCode.NONE:
        if tps is None:
            found = {tp: o for tp, o in found.items() if tp[0] not in refused}
        else:
            return code, _with_refused(found, refused)
    out: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in sorted(found.items()):
        if (topic, partition) in unstable:  # KIP-447: a transaction's commit is pending
            o = None
        out.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": -1 if o is None else o.offset,
            "committed_leader_epoch": -1 if o is None else o.leader_epoch,
            "metadata": "" if o is None else o.metadata,
            "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, partition) in unstable
            else code,
        })
    return code, [{"name": n, "partitions": parts} for n, parts in out.items()]


def _with_refused(found: dict[tuple[str, int], OffsetAndMetadata | None],
                  refused: set[str]) -> list[dict[str, Any]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in sorted(found.items()):
        denied = topic in refused
        out.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": -1 if o is None or denied else o.offset,
            "committed_leader_epoch": -1 if o is None or denied else o.leader_epoch,
            "metadata": "" if o is None or denied else o.metadata,
            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied else ErrorCode.NONE,
        })
    return [{"name": n, "partitions": parts} for n, parts in out.items()]


def _fetch_v0_answer(found: dict[TopicPartition, tuple[int, ErrorCode]]) -> dict[str, Any]:
    out: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (offset, code) in found.items():
        out.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset,
            "committed_leader_epoch": -1, "metadata": "", "error_code": code})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "topics": [{"name": n, "partitions": parts} for n, parts in out.items()]}


async def _fetch_v0_zookeeper(services: BrokerServices, ctx: RequestContext,
                              request: dict[str, Any]) -> dict[str, Any]:
    """OffsetFetch v0 in a ZooKeeper cluster (Kafka's handleOffsetFetchRequest, v0):
    Describe on the group, then per partition Describe on its topic and a partition the
    cluster knows; the offset is read from /consumers/GROUP/offsets/TOPIC/PARTITION (no
    znode: -1, UNKNOWN_TOPIC_OR_PARTITION; text that is no number: -1,
    UNKNOWN_SERVER_ERROR, Kafka's NumberFormatException), never with metadata."""
    group = request["group_id"]
    tps = [(t["name"], p) for t in request.get("topics") or ()
           for p in t.get("partition_indexes") or ()]
    if not authorize_group(services, ctx, AclOperation.DESCRIBE, group):
        return _fetch_v0_answer(
            {tp: (-1, ErrorCode.GROUP_AUTHORIZATION_FAILED) for tp in tps})
    refused = unauthorized_topics(services, ctx, AclOperation.DESCRIBE, (t for t, _p in tps))
    found: dict[TopicPartition, tuple[int, ErrorCode]] = {}
    to_read: list[TopicPartition] = []
    for tp in tps:
        if tp[0] in refused:
            found[tp] = (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif services.metadata_cache.partition(*tp) is None:
            found[tp] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            to_read.append(tp)
    if to_read:
        try:
            stored: dict[TopicPartition, consumer_registry.StoredOffset] = await _zookeeper(
                services, consumer_registry.read_offsets, group, to_read)
        except Exception as e:  # Kafka: Errors.forException
            code = ErrorCode.REQUEST_TIMED_OUT if isinstance(e, TimeoutError) \
                else ErrorCode.UNKNOWN_SERVER_ERROR
            found.update((tp, (-1, code)) for tp in to_read)
        else:
            for tp in to_read:
                s = stored.get(tp)
                value = None if s is None else consumer_registry.parse_decimal(s.raw)
                if s is None:
                    found[tp] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif s.malformed or value is None:
                    found[tp] = (-1, ErrorCode.UNKNOWN_SERVER_ERROR)
                else:  # a negative offset is a number: Kafka answered it as it is
                    found[tp] = (value, ErrorCode.NONE)
    return _fetch_v0_answer({tp: found[tp] for tp in tps})


def handle_offset_fetch(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                        ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    v = ctx.api_version
    if v == 0 and services.cluster is not None:
        return _fetch_v0_zookeeper(services, ctx, request)
    if v >= 8:
        groups = []
        stable = bool(request.get("require_stable"))
        for g in request.get("groups") or ():
            code, topics = _fetch_group(services, ctx, g["group_id"], g.get("topics"), stable)
            if code != ErrorCode.NONE:
                for t in topics:
                    for p in t["partitions"]:
                        p["error_code"] = ErrorCode.NONE
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    topics_req = request.get("topics")
    if v < 2 and topics_req is None:
        topics_req = []
    code, topics = _fetch_group(services, ctx, request["group_id"], topics_req,
                                v >= 7 and bool(request.get("require_stable")))
    if v >= 2 and code != ErrorCode.NONE:
        for t in topics:
            for p in t["partitions"]:
                p["error_code"] = ErrorCode.NONE
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}


def handle_offset_delete(services: BrokerServices, ctx: RequestContext,
                         request: dict[str, Any]) -> dict[str, Any]:
    coordinator = services.group_coordinator
    tps = [(t["name"], p["partition_index"]) for t in request.get("topics") or ()
           for p in t.get("partitions") or ()]
    if not authorize_group(services, ctx, AclOperation.DELETE, request["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                "topics": []}
    refused = unauthorized_topics(services, ctx, AclOperation.READ, (t for t, _p in tps))
    code, results = coordinator.delete_offsets(
        request["group_id"], [tp for tp in tps if tp[0] not in refused])
    results.update({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in tps
                    if tp[0] in refused})
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), err in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": err})
    return {"error_code": code, "throttle_time_ms": 0, "topics": [
        {"name": n, "partitions": parts} for n, parts in topics.items()]}
