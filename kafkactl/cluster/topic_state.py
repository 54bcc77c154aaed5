"""Topics in ZooKeeper as Kafka's ZooKeeper mode lays them out (seed 002):

    /brokers/topics/[t]                      {"version":3,"topic_id":...,"partitions":{"0":[1,2]},
                                              "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/[t]/partitions/[n]/state {"controller_epoch":c,"leader":l,"version":1,
                                              "leader_epoch":e,"isr":[...]}
    /config/topics/[t]                       {"version":1,"config":{...}}
    /admin/delete_topics/[t]                 (empty: a deletion the controller carries out)

Blocking kazoo calls (callers run them off the event loop). A znode holding malformed JSON
is logged and treated as absent, never a crash.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json, get_all, read_json

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

TOPIC_ZNODE_VERSION = 3  # with topic_id (Kafka 2.8+)
NO_LEADER = -1


@dataclass
class PartitionState:
    """A partition's leadership as the controller decided it, and the znode's version
    (`zk_version`, Kafka's partition epoch) for conditional updates."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0

    def to_json(self) -> bytes:
        return encode_json({"controller_epoch": self.controller_epoch, "leader": self.leader,
                            "version": 1, "leader_epoch": self.leader_epoch,
                            "isr": list(self.isr)})


def parse_partition_state(value: Any, zk_version: int = 0) -> PartitionState | None:
    if not isinstance(value, dict):
        return None
    leader, epoch = value.get("leader"), value.get("leader_epoch")
    isr, cepoch = value.get("isr"), value.get("controller_epoch")
    if not (isinstance(leader, int) and isinstance(epoch, int) and isinstance(cepoch, int)
            and isinstance(isr, list) and all(isinstance(r, int) for r in isr)):
        return None
    return PartitionState(leader, epoch, list(isr), cepoch, zk_version)


@dataclass
class TopicAssignment:
    """partition -> replicas (the first is the preferred leader), and the topic id."""

    name: str
    partitions: dict[int, list[int]]
    topic_id: uuid.UUID | None = None
    zk_version: int = 0
    # reassignments in progress: partition -> replicas being added / removed (KIP-455)
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        value: dict[str, Any] = {
            "version": TOPIC_ZNODE_VERSION,
            "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
            "adding_replicas": {str(p): r for p, r in sorted(self.adding.items()) if r},
            "removing_replicas": {str(p): r for p, r in sorted(self.removing.items()) if r}}
        if self.topic_id is not None:
            value["topic_id"] = str(self.topic_id)
        return encode_json(value)


def parse_assignment(name: str, value: Any, zk_version: int = 0) -> TopicAssignment | None:
    parts = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(parts, dict) or not parts:
        return None
    out: dict[int, list[int]] = {}
    for p, replicas in parts.items():
        if not str(p).isdigit() or not isinstance(replicas, list) or not replicas \
                or not all(isinstance(r, int) for r in replicas):
            return None
        out[int(p)] = list(replicas)
    if sorted(out) != list(range(len(out))):
        return None
    topic_id = None
    raw = value.get("topic_id")
    if isinstance(raw, str):
        try:
            topic_id = uuid.UUID(raw)
        except ValueError:
            topic_id = None
    return TopicAssignment(name, out, topic_id, zk_version,
                           _replica_map(value.get("adding_replicas")),
                           _replica_map(value.get("removing_replicas")))


def _replica_map(value: Any) -> dict[int, list[int]]:
    if not isinstance(value, dict):
        return {}
    return {int(p): [b for b in r if isinstance(b, int)] for p, r in value.items()
            if str(p).isdigit() and isinstance(r, list)}


def read_assignment(zk: KazooClient, name: str) -> TopicAssignment | None:
    """A topic's assignment (None: absent or malformed, logged)."""
    return read_assignments(zk, [name])[name]


def read_assignments(zk: KazooClient, names: list[str]) -> dict[str, TopicAssignment | None]:
    """Topics' assignments (None: absent or malformed, logged), read pipelined."""
    paths = {name: zk_paths.topic(name) for name in names}
    out: dict[str, TopicAssignment | None] = {}
    for name, got in get_all(zk, paths).items():
        parsed = None if got is None else parse_assignment(
            name, decode_json(got[0], paths[name]), got[1].version)
        if parsed is None and got is not None and got[0]:
            log.warning("ignoring topic znode %s: no valid partition map", paths[name])
        out[name] = parsed
    return out


def create_topic(zk: KazooClient, assignment: TopicAssignment,
                 configs: dict[str, str]) -> None:
    """Write /config/topics/[t] then /brokers/topics/[t] in one transaction (the
    controller acts on the second). Raises kazoo's NodeExistsError if the topic exists."""
    from kazoo.exceptions import NodeExistsError

    for parent in (zk_paths.BROKER_TOPICS, zk_paths.CONFIG_TOPICS):
        zk.ensure_path(parent)
    tx = zk.transaction()
    config_path = zk_paths.topic_config(assignment.name)
    config_value = encode_json({"version": 1, "config": dict(configs)})
    if zk.exists(config_path):  # left by an interrupted deletion: replaced
        tx.set_data(config_path, config_value)
    else:
        tx.create(config_path, config_value)
    tx.create(zk_paths.topic(assignment.name), assignment.to_json())
    results = tx.commit()
    for r in results:
        if isinstance(r, NodeExistsError):
            raise NodeExistsError(zk_paths.topic(assignment.name))
        if isinstance(r, Exception):
            raise r


def set_assignment(zk: KazooClient, assignment: TopicAssignment) -> None:
    """Replace a topic's assignment if nobody changed it since it was read (BadVersionError
    otherwise)."""
    zk.set(zk_paths.topic(assignment.name), assignment.to_json(),
           version=assignment.zk_version)


def read_topic_config(zk: KazooClient, name: str) -> dict[str, str]:
    value = read_json(zk, zk_paths.topic_config(name))
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return {}
    return {str(k): str(v) for k, v in config.items() if v is not None}


def set_topic_config(zk: KazooClient, name: str, configs: dict[str, str]) -> None:
    zk.ensure_path(zk_paths.CONFIG_TOPICS)
    value = encode_json({"version": 1, "config": dict(configs)})
    path = zk_paths.topic_config(name)
    if zk.exists(path):
        zk.set(path, value)
    else:
        zk.create(path, value)


def read_partition_state(zk: KazooClient, name: str, partition: int) -> PartitionState | None:
    return read_partition_states(zk, [(name, partition)])[(name, partition)]


def read_partition_states(zk: KazooClient, partitions: list[tuple[str, int]]
                          ) -> dict[tuple[str, int], PartitionState | None]:
    """Partition states (None: absent or malformed, logged), read pipelined."""
    paths = {tp: zk_paths.partition_state(*tp) for tp in partitions}
    out: dict[tuple[str, int], PartitionState | None] = {}
    for tp, got in get_all(zk, paths).items():
        parsed = None if got is None else parse_partition_state(
            decode_json(got[0], paths[tp]), got[1].version)
        if parsed is None and got is not None:
            log.warning("ignoring partition state %s: not a valid state", paths[tp])
        out[tp] = parsed
    return out


def create_partition_state(zk: KazooClient, name: str, partition: int,
                           state: PartitionState) -> PartitionState:
    """Create the state znode; if it exists (a controller fail-over raced us), return
    what it holds instead."""
    from kazoo.exceptions import NodeExistsError

    path = zk_paths.partition_state(name, partition)
    try:
        zk.create(path, state.to_json(), makepath=True)
        state.zk_version = 0
        return state
    except NodeExistsError:
        found = read_partition_state(zk, name, partition)
        if found is None:  # garbage in the znode: overwrite it
            stat = zk.set(path, state.to_json())
            state.zk_version = stat.version
            return state
        return found


def update_partition_state(zk: KazooClient, name: str, partition: int,
                           state: PartitionState) -> PartitionState:
    """Write `state` if the znode still has version `state.zk_version` (kazoo's
    BadVersionError otherwise: someone else changed it); returns it with the new version."""
    stat = zk.set(zk_paths.partition_state(name, partition), state.to_json(),
                  version=state.zk_version)
    state.zk_version = stat.version
    return state


def topic_names(zk: KazooClient) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(zk.get_children(zk_paths.BROKER_TOPICS))
    except NoNodeError:
        return []


def topics_to_delete(zk: KazooClient) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(zk.get_children(zk_paths.DELETE_TOPICS))
    except NoNodeError:
        return []


def mark_for_deletion(zk: KazooClient, name: str) -> None:
    from kazoo.exceptions import NodeExistsError

    with contextlib.suppress(NodeExistsError):
        zk.create(zk_paths.topic_delete_marker(name), b"", makepath=True)


def remove_topic(zk: KazooClient, name: str) -> None:
    """The last step of a deletion: the topic's znodes, its config, then the marker."""
    from kazoo.exceptions import NoNodeError

    for path, recursive in ((zk_paths.topic(name), True), (zk_paths.topic_config(name), False),
                            (zk_paths.topic_delete_marker(name), False)):
        with contextlib.suppress(NoNodeError):
            zk.delete(path, recursive=recursive)
