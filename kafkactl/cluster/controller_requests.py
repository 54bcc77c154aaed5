"""The bodies of the controller's requests to brokers (LeaderAndIsr v6, UpdateMetadata v7,
StopReplica v3), built from the controller's view of the cluster. Pure functions.

UpdateMetadata is incremental, as Kafka's controller sends it: the partitions whose state
changed, the partitions of topics deleted since the last one (leader -2, Kafka's
LeaderDuringDelete: the broker drops them) and, always, every live broker. A full one (every
partition) goes to a broker that joins and, from a newly elected controller, to every
broker. v7 has no Type field (v8's, KIP-866), so the broker tells a full one by where it
comes from: the first request of a controller epoch to a broker epoch is full, and the
controller sends a full one exactly then (broker/zk_metadata_cache.py)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cluster.broker_registry import BrokerInfo
from kafkactl.cluster.topic_state import NO_LEADER, PartitionState

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
PLAINTEXT = 0  # SecurityProtocol id
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
EPOCH_DURING_DELETE = -2  # StopReplica's leader epoch when the partition is deleted
LEADER_DURING_DELETE = -2  # UpdateMetadata's leader of a partition whose topic is deleted
NULL_UUID = uuid.UUID(int=0)


@dataclass
class ClusterView:
    """What the controller knows: live brokers, assignments, partition states."""

    controller_id: int
    controller_epoch: int
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    # topics removed since the last UpdateMetadata: name -> (id, partition -> replicas)
    deleted: dict[str, tuple[uuid.UUID, dict[int, list[int]]]] = field(default_factory=dict)
    # replicas in a log dir their broker has offline (KIP-112): broker -> its partitions
    # there, learnt from LeaderAndIsr answers (KAFKA_STORAGE_ERROR), forgotten when the
    # broker registers again
    offline_replicas: dict[int, set[tuple[str, int]]] = field(default_factory=dict)

    def online_replicas(self, tp: tuple[str, int], replicas: Iterable[int]) -> set[int]:
        """The replicas of `tp` whose broker is live and has their log dir online
        (Kafka's isReplicaOnline)."""
        offline = self.offline_replicas
        return {r for r in replicas if r in self.brokers
                and not (offline and tp in offline.get(r, ()))}

    def partitions_of(self, broker_id: int) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in self.assignments.items()
                for p, replicas in parts.items() if broker_id in replicas]

    def partitions_on(self, broker_ids: Iterable[int]) -> set[tuple[str, int]]:
        """The partitions with a replica on any of `broker_ids`."""
        ids = set(broker_ids)
        if not ids:
            return set()
        return {(t, p) for t, parts in self.assignments.items()
                for p, replicas in parts.items() if ids.intersection(replicas)}

    def remove_topic(self, name: str) -> None:
        """Forget a topic; the next UpdateMetadata announces it deleted."""
        parts = self.assignments.pop(name, {})
        topic_id = self.topic_ids.pop(name, None)
        for p in parts:
            self.states.pop((name, p), None)
        if parts:
            self.deleted[name] = (topic_id or NULL_UUID, dict(parts))

    def take_deleted(self) -> dict[str, tuple[uuid.UUID, dict[int, list[int]]]]:
        """The topics to announce deleted (the next request carries them)."""
        deleted, self.deleted = self.deleted, {}
        return {name: d for name, d in deleted.items() if name not in self.assignments}

    def broker_epoch(self, broker_id: int) -> int:
        info = self.brokers.get(broker_id)
        return info.epoch if info is not None else -1


def _endpoints(info: BrokerInfo) -> list[dict[str, Any]]:
    """Every listener the broker registered, in its order (the first is its default)."""
    listeners = info.listeners() or {"PLAINTEXT": (info.host, info.port)}
    return [{"port": port, "host": host, "listener": name,
             "security_protocol": SECURITY_PROTOCOL_IDS.get(info.protocol(name), PLAINTEXT)}
            for name, (host, port) in listeners.items()]


def _state_fields(view: ClusterView, topic: str, p: int) -> dict[str, Any]:
    state = view.states.get((topic, p))
    replicas = view.assignments[topic][p]
    if state is None:  # never started: no replica has been live
        return {"controller_epoch": view.controller_epoch, "leader": NO_LEADER,
                "leader_epoch": -1, "isr": [], "replicas": replicas}
    return {"controller_epoch": state.controller_epoch, "leader": state.leader,
            "leader_epoch": state.leader_epoch, "isr": list(state.isr),
            "replicas": replicas, "zk_version": state.zk_version}


def _partition_state(view: ClusterView, topic: str, p: int) -> dict[str, Any]:
    f = _state_fields(view, topic, p)
    return {"partition_index": p, "controller_epoch": f["controller_epoch"],
            "leader": f["leader"], "leader_epoch": f["leader_epoch"], "isr": f["isr"],
            "zk_version": f.get("zk_version", -1), "replicas": f["replicas"],
            "offline_replicas": [r for r in f["replicas"]
                                 if r not in view.online_replicas((topic, p), (r,))]}


def update_metadata(view: ClusterView, broker_id: int,
                    partitions: Iterable[tuple[str, int]] | None = None,
                    deleted: Mapping[str, tuple[uuid.UUID, Mapping[int, list[int]]]]
                    | None = None) -> dict[str, Any]:
    """UpdateMetadata for one broker: every partition (`partitions` None: a full one, the
    broker replaces its cache) or only `partitions` and the `deleted` topics' partitions
    (leader -2); the live brokers always."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if partitions is None:
        for topic in sorted(view.assignments):
            by_topic[topic] = [_partition_state(view, topic, p)
                               for p in sorted(view.assignments[topic])]
    else:
        for topic, p in sorted(set(partitions)):
            if p in view.assignments.get(topic, {}):
                by_topic.setdefault(topic, []).append(_partition_state(view, topic, p))
    topic_states = [{"topic_name": topic, "topic_id": view.topic_ids.get(topic, NULL_UUID),
                     "partition_states": parts} for topic, parts in by_topic.items()]
    for topic, (topic_id, parts) in sorted((deleted or {}).items()):
        if partitions is None or topic in view.assignments:
            continue  # a full request lists no deleted topic; a re-created one is listed
        topic_states.append({"topic_name": topic, "topic_id": topic_id, "partition_states": [
            {"partition_index": p, "controller_epoch": view.controller_epoch,
             "leader": LEADER_DURING_DELETE, "leader_epoch": -1, "isr": [], "zk_version": -1,
             "replicas": replicas, "offline_replicas": []}
            for p, replicas in sorted(parts.items())]})
    return {
        "controller_id": view.controller_id, "controller_epoch": view.controller_epoch,
        "broker_epoch": view.broker_epoch(broker_id), "topic_states": topic_states,
        "live_brokers": [{"id": b.broker_id, "endpoints": _endpoints(b), "rack": None}
                         for b in sorted(view.brokers.values(), key=lambda b: b.broker_id)],
    }


def leader_and_isr(view: ClusterView, broker_id: int,
                   partitions: Iterable[tuple[str, int]], *, is_new: bool = False,
                   full: bool = False,
                   adding: Mapping[tuple[str, int], Collection[int]] | None = None
                   ) -> dict[str, Any] | None:
    """LeaderAndIsr for `partitions` that `broker_id` hosts; None when there is none. A
    replica is new (`is_new`, and a reassignment's `adding` replicas): its broker may make
    its log even while one of its log dirs is offline."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    leaders: set[int] = set()
    for topic, p in sorted(set(partitions)):
        replicas = view.assignments.get(topic, {}).get(p)
        if replicas is None or broker_id not in replicas:
            continue
        f = _state_fields(view, topic, p)
        if "zk_version" not in f:
            continue  # no state yet: nothing to lead or follow
        by_topic.setdefault(topic, []).append({
            "partition_index": p, "controller_epoch": f["controller_epoch"],
            "leader": f["leader"], "leader_epoch": f["leader_epoch"], "isr": f["isr"],
            "partition_epoch": f["zk_version"], "replicas": replicas,
            "adding_replicas": [], "removing_replicas": [],
            "is_new": is_new or (adding is not None and broker_id in adding.get((topic, p), ())),
            "leader_recovery_state": 0})
        if f["leader"] >= 0:
            leaders.add(f["leader"])
    if not by_topic:
        return None
    return {
        "controller_id": view.controller_id, "controller_epoch": view.controller_epoch,
        "broker_epoch": view.broker_epoch(broker_id), "type": 1 if full else 0,
        "topic_states": [{"topic_name": t, "topic_id": view.topic_ids.get(t, NULL_UUID),
                          "partition_states": ps} for t, ps in by_topic.items()],
        "live_leaders": [{"broker_id": b, "host_name": view.brokers[b].host,
                          "port": view.brokers[b].port}
                         for b in sorted(leaders) if b in view.brokers],
    }


def stop_replica(view: ClusterView, broker_id: int,
                 partitions: Mapping[str, list[int]], *, delete: bool) -> dict[str, Any]:
    return {
        "controller_id": view.controller_id, "controller_epoch": view.controller_epoch,
        "broker_epoch": view.broker_epoch(broker_id),
        "topic_states": [{"topic_name": t, "partition_states": [
            {"partition_index": p, "delete_partition": delete,
             "leader_epoch": EPOCH_DURING_DELETE if delete else -1} for p in sorted(ps)]}
            for t, ps in sorted(partitions.items())],
    }
