"""Committed offsets: OffsetCommit (8), OffsetFetch (9, incl. the v8 batched form) and
OffsetDelete (47), answered by the GroupCoordinator's offset manager."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.coordinator.group import OffsetAndMetadata
from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode


def handle_offset_commit(services: BrokerServices, ctx: RequestContext,
                         request: dict[str, Any]) -> dict[str, Any]:
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
    errors = coordinator.commit_offsets(request["group_id"], generation, member,
                                        request.get("group_instance_id"), offsets)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": parts} for name, parts in topics.items()]}


def _fetch_group(coordinator: GroupCoordinator, group_id: str, topics: list[dict[str, Any]] | None
                 ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    tps = None if topics is None else [
        (t["name"], p) for t in topics for p in t.get("partition_indexes") or ()]
    code, found = coordinator.fetch_offsets(group_id, tps)
    if code != ErrorCode.NONE:
        found = {tp: None for tp in tps or ()}
    out: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in sorted(found.items()):
        out.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": -1 if o is None else o.offset,
            "committed_leader_epoch": -1 if o is None else o.leader_epoch,
            "metadata": "" if o is None else o.metadata,
            "error_code": code,
        })
    return code, [{"name": n, "partitions": parts} for n, parts in out.items()]


def handle_offset_fetch(services: BrokerServices, ctx: RequestContext,
                        request: dict[str, Any]) -> dict[str, Any]:
    coordinator = services.group_coordinator
    v = ctx.api_version
    if v >= 8:
        groups = []
        for g in request.get("groups") or ():
            code, topics = _fetch_group(coordinator, g["group_id"], g.get("topics"))
            if code != ErrorCode.NONE:
                for t in topics:
                    for p in t["partitions"]:
                        p["error_code"] = ErrorCode.NONE
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    topics_req = request.get("topics")
    if v < 2 and topics_req is None:
        topics_req = []
    code, topics = _fetch_group(coordinator, request["group_id"], topics_req)
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
    code, results = coordinator.delete_offsets(request["group_id"], tps)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), err in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": err})
    return {"error_code": code, "throttle_time_ms": 0, "topics": [
        {"name": n, "partitions": parts} for n, parts in topics.items()]}
