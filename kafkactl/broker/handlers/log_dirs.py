"""DescribeLogDirs (key 35): each log directory, the replicas it holds and their sizes;
AlterReplicaLogDirs (key 34): move replicas to another log directory of this broker.

What kafka-log-dirs.sh --describe, Sarama's and kafkajs' admin clients, and `kafkactl top`
read: per directory its path, the partitions of the requested topics (all with a null
list) with their size in bytes and their offset lag (log end - high watermark), and (v4)
the volume's total and usable bytes. A directory the broker took offline answers
KAFKA_STORAGE_ERROR. A replica being moved to another dir is listed there too, with
is_future_key set, the bytes copied so far and its lag behind the current replica. Kafka
requires DESCRIBE on the cluster.

AlterReplicaLogDirs starts a move per partition (broker/log_dir_mover.py) and answers at
once, as Kafka does: LOG_DIR_NOT_FOUND for a path that is not one of this broker's log
dirs, KAFKA_STORAGE_ERROR for an offline one, REPLICA_NOT_AVAILABLE for a partition this
broker does not host (Kafka's answer), CLUSTER_AUTHORIZATION_FAILED without ALTER on the
cluster. Progress and the end of a move show in DescribeLogDirs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafkactl.broker.log_dir_mover import mover_for, moves_of
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode


def _volume(log_dir: Path) -> tuple[int, int]:
    """(total bytes, usable bytes) of the volume `log_dir` is on; (-1, -1) if unknown."""
    try:
        st = os.statvfs(log_dir)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _index(partition: dict[str, Any]) -> int:
    return int(partition["partition_index"])


def handle_describe_log_dirs(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    wanted: dict[str, set[int]] | None = None
    if request.get("topics") is not None:
        wanted = {}
        for t in request["topics"]:
            wanted.setdefault(t["topic"], set()).update(t.get("partitions") or ())
    manager = services.log_manager
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {d: {} for d in manager.log_dirs}
    for tp, log_dir, log in manager.describe_logs():
        topic, partition = tp
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        part = services.replica_manager.partitions.get_partition(topic, partition)
        end = log.log_end_offset
        hw = part.high_watermark if part is not None else end
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append({
            "partition_index": partition, "partition_size": log.size_in_bytes,
            "offset_lag": max(0, end - hw), "is_future_key": False})
    moves = moves_of(services)
    for (topic, partition), dest, copied, lag in moves.futures() if moves else ():
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        by_dir.setdefault(dest, {}).setdefault(topic, []).append({
            "partition_index": partition, "partition_size": copied, "offset_lag": lag,
            "is_future_key": True})
    offline = manager.offline_dirs()
    results: list[dict[str, Any]] = []
    for log_dir, topics in by_dir.items():
        # offline since the start: a failed disk's volume is not asked (Kafka: unknown, -1)
        total, usable = (-1, -1) if log_dir in manager.offline else _volume(log_dir)
        results.append({
            "error_code": ErrorCode.KAFKA_STORAGE_ERROR if log_dir in offline else
            ErrorCode.NONE,
            "log_dir": str(log_dir.absolute()),
            "topics": [{"name": name, "partitions": sorted(parts, key=_index)}
                       for name, parts in sorted(topics.items())],
            "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def _log_dir(dirs: list[Path], path: str) -> Path | None:
    """The log dir `path` names (as DescribeLogDirs gives it, or the same dir otherwise
    written), None when it is none of them."""
    try:
        wanted = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    for d in dirs:
        if d.resolve() == wanted:
            return d
    return None


def handle_alter_replica_log_dirs(services: BrokerServices, ctx: RequestContext,
                                  request: dict[str, Any]) -> dict[str, Any]:
    allowed = authorize_cluster(services, ctx, AclOperation.ALTER)
    manager = services.log_manager
    offline = manager.offline_dirs()
    results: dict[str, dict[int, int]] = {}
    moves: dict[tuple[str, int], Path] = {}
    for entry in request.get("dirs") or ():
        log_dir = _log_dir(manager.log_dirs, entry["path"]) if entry["path"] else None
        for t in entry.get("topics") or ():
            for p in t.get("partitions") or ():
                tp = (t["name"], int(p))
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif log_dir is None:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif log_dir in offline:
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                elif services.partitions.get_partition(*tp) is None:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                else:
                    code = ErrorCode.NONE
                    moves[tp] = log_dir
                results.setdefault(tp[0], {})[tp[1]] = code
                if code != ErrorCode.NONE:
                    moves.pop(tp, None)  # a later entry naming it again decides
    if moves:
        mover = mover_for(services)
        for tp, log_dir in moves.items():
            mover.start(tp, log_dir)
    return {"throttle_time_ms": 0, "results": [
        {"topic_name": name, "partitions": [
            {"partition_index": p, "error_code": code} for p, code in sorted(parts.items())]}
        for name, parts in sorted(results.items())]}
