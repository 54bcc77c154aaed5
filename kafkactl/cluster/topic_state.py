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
from kafkactl.cluster.zookeeper import (
    check_write_size,
    decode_json,
    encode_json,
    get_all,
    read_json,
)

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


def topic_writes(assignment: TopicAssignment, configs: dict[str, str]
                 ) -> list[tuple[str, bytes]]:
    """The (path, data) a topic's creation writes in one transaction: its config znode,
    then its topic znode."""
    return [(zk_paths.topic_config(assignment.name),
             encode_json({"version": 1, "config": dict(configs)})),
            (zk_paths.topic(assignment.name), assignment.to_json())]


def check_topic_size(assignment: TopicAssignment, configs: dict[str, str],
                     writes: list[tuple[str, bytes]] | None = None) -> None:
    """ZnodeTooLargeError when ZooKeeper would refuse the topic's creation (too many
    partitions or replicas for one znode), before anything is written (`writes`: its
    topic_writes, when made already)."""
    check_write_size(f"topic {assignment.name!r} ({len(assignment.partitions)} partitions)",
                     topic_writes(assignment, configs) if writes is None else writes)


def min_topic_znode_bytes(partitions: int, replication_factor: int) -> int:
    """The least a topic znode of that many partitions and replicas weighs (each
    partition's `"n":[b,..],` with one-digit broker ids): a count that cannot fit is
    refused before its assignment is built."""
    digits, low, width = 0, 0, 1  # the digits of the partition numbers 0..partitions-1
    while low < partitions:
        high = 10 ** width
        digits += (min(partitions, high) - low) * width
        low, width = high, width + 1
    return digits + partitions * (5 + 2 * max(replication_factor, 1))


def create_topic(zk: KazooClient, assignment: TopicAssignment,
                 configs: dict[str, str]) -> None:
    """Write /config/topics/[t] then /brokers/topics/[t] in one transaction (the
    controller acts on the second). Raises kazoo's NodeExistsError if the topic exists,
    ZnodeTooLargeError (nothing written) if ZooKeeper would refuse it."""
    from kazoo.exceptions import NodeExistsError

    writes = topic_writes(assignment, configs)
    check_topic_size(assignment, configs, writes)
    (config_path, config_value), (topic_path, topic_value) = writes
    for parent in (zk_paths.BROKER_TOPICS, zk_paths.CONFIG_TOPICS):
        zk.ensure_path(parent)
    tx = zk.transaction()
    if zk.exists(config_path):  # left by an interrupted deletion: replaced
        tx.set_data(config_path, config_value)
    else:
        tx.create(config_path, config_value)
    tx.create(topic_path, topic_value)
    results = tx.commit()
    for r in results:
        if isinstance(r, NodeExistsError):
            raise NodeExistsError(zk_paths.topic(assignment.name))
        if isinstance(r, Exception):
            raise r


def set_assignment(zk: KazooClient, assignment: TopicAssignment) -> None:
    """Replace a topic's assignment if nobody changed it since it was read (BadVersionError
    otherwise; ZnodeTooLargeError, nothing written, if ZooKeeper would refuse it)."""
    path, value = zk_paths.topic(assignment.name), assignment.to_json()
    check_assignment_size(assignment, value)
    zk.set(path, value, version=assignment.zk_version)


def check_assignment_size(assignment: TopicAssignment, value: bytes | None = None) -> None:
    """ZnodeTooLargeError when ZooKeeper would refuse the topic znode (`value`: its JSON,
    when made already)."""
    check_write_size(f"topic {assignment.name!r} ({len(assignment.partitions)} partitions)",
                     [(zk_paths.topic(assignment.name),
                       assignment.to_json() if value is None else value)])


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


def marked_for_deletion(zk: KazooClient, name: str) -> bool:
    """Whether /admin/delete_topics/[t] asks for the topic's deletion (not finished yet)."""
    return zk.exists(zk_paths.topic_delete_marker(name)) is not None


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
