"""DescribeLogDirs (key 35): each log directory, the replicas it holds and their sizes.

What kafka-log-dirs.sh --describe, Sarama's and kafkajs' admin clients, and `kafkactl top`
read: per directory its path, the partitions of the requested topics (all with a null
list) with their size in bytes and their offset lag (log end - high watermark), and (v4)
the volume's total and usable bytes. A directory the broker took offline answers
KAFKA_STORAGE_ERROR. Kafka requires DESCRIBE on the cluster.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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
    offline = manager.offline_dirs()
    results: list[dict[str, Any]] = []
    for log_dir, topics in by_dir.items():
        total, usable = _volume(log_dir)
        results.append({
            "error_code": ErrorCode.KAFKA_STORAGE_ERROR if log_dir in offline else
            ErrorCode.NONE,
            "log_dir": str(log_dir.absolute()),
            "topics": [{"name": name, "partitions": sorted(parts, key=_index)}
                       for name, parts in sorted(topics.items())],
            "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}
