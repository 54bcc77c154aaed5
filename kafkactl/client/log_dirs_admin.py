"""Log dirs through the Kafka protocol: DescribeLogDirs (what each broker's log dirs hold)
and AlterReplicaLogDirs (move a replica to another log dir of its broker), as
kafka-log-dirs.sh and kafka-reassign-partitions' log-dir moves use them. Each request goes
to the broker it is about: a broker only knows its own dirs."""

from __future__ import annotations

from dataclasses import dataclass

from kafkactl.client.errors import ClientError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ReplicaInDir:
    broker: int
    log_dir: str
    topic: str
    partition: int
    size: int
    offset_lag: int
    future: bool  # a replica being moved into this dir (not yet the partition's)


@dataclass(frozen=True)
class LogDir:
    broker: int
    path: str
    error: str | None
    total_bytes: int
    usable_bytes: int
    replicas: list[ReplicaInDir]


def brokers(client: KafkaClient) -> list[int]:
    return sorted(client.refresh_metadata([]).brokers)


def describe(client: KafkaClient, broker: int,
             topics: dict[str, list[int]] | None = None) -> list[LogDir]:
    """The log dirs of `broker` and the replicas in them (of `topics` only, when given:
    topic -> partitions, [] for all of its partitions)."""
    wanted = None
    if topics is None:
        client.refresh_metadata([])  # the brokers' addresses
    else:
        cluster = client.refresh_metadata(list(topics))
        wanted = []
        for name, parts in topics.items():
            found = cluster.topics.get(name)
            every = sorted(found.partitions) if found is not None else []
            wanted.append({"topic": name, "partitions": parts or every})
    resp = client.connection(broker).request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted})
    if resp.get("error_code"):
        raise ClientError(f"describe log dirs of broker {broker}: "
                          f"{ErrorCode(resp['error_code']).name}")
    out = []
    for r in resp.get("results") or ():
        replicas = [ReplicaInDir(broker, r["log_dir"], t["name"], p["partition_index"],
                                 p["partition_size"], p["offset_lag"], p["is_future_key"])
                    for t in r.get("topics") or () for p in t.get("partitions") or ()]
        out.append(LogDir(broker, r["log_dir"],
                          ErrorCode(r["error_code"]).name if r["error_code"] else None,
                          r.get("total_bytes", -1), r.get("usable_bytes", -1), replicas))
    return out


def move(client: KafkaClient, broker: int, log_dir: str,
         partitions: dict[str, list[int]]) -> dict[tuple[str, int], str | None]:
    """Ask `broker` to move its replicas of `partitions` to `log_dir`; each partition's
    error name, or None when the move started (or the replica is there already)."""
    client.refresh_metadata([])  # the brokers' addresses
    body = {"dirs": [{"path": log_dir, "topics": [
        {"name": name, "partitions": parts} for name, parts in partitions.items()]}]}
    resp = client.connection(broker).request(ApiKey.ALTER_REPLICA_LOG_DIRS, body)
    return {(t["topic_name"], p["partition_index"]):
            ErrorCode(p["error_code"]).name if p["error_code"] else None
            for t in resp.get("results") or () for p in t.get("partitions") or ()}
