"""The controller's ZooKeeper writes, each fenced by the controller epoch (Kafka's
KafkaZkClient `checkControllerAndEpoch`): every write is a ZooKeeper transaction (multi)
whose first op checks `/controller_epoch`'s znode version, the one this controller
produced when it won. A deposed controller's late write fails as a whole and raises
ControllerMovedError (the caller resigns); the new controller's state wins.

Blocking kazoo calls, run in worker threads. They only return values: the controller's
event task applies them to its state.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zk_paths
from kafkactl.cluster.config_changes import BROKERS, TOPICS, parse_config
from kafkactl.cluster.topic_state import PartitionState, TopicAssignment
from kafkactl.cluster.zookeeper import check_write_size, decode_json, get_all

if TYPE_CHECKING:
    from kazoo.client import KazooClient

TopicPartition = tuple[str, int]
WRITE_TIMEOUT_S = 30.0
UNCLEAN_KEY = "unclean.leader.election.enable"
# one op: ("create", path, data) | ("set", path, data, version) | ("delete", path)
Op = tuple[Any, ...]


class ControllerMovedError(Exception):
    """/controller_epoch changed since this controller won: another broker is the
    controller now, and this one's write was refused."""


def commit_fenced(zk: KazooClient, epoch_version: int, groups: list[list[Op]]
                  ) -> list[BaseException | None]:
    """Commit each group of ops as one transaction behind a check of /controller_epoch's
    version, pipelined; per group None (committed) or the error of the op that failed.
    Raises ControllerMovedError when the epoch check failed for any group (the groups that
    passed it are committed: they were written while this controller still held the
    epoch), and ZnodeTooLargeError, before anything is sent, for a group ZooKeeper would
    refuse (it would drop the connection: every retry the same)."""
    from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

    for ops in groups:
        check_write_size(f"the controller's write of {ops[0][1]}" if ops else "",
                         [(op[1], op[2] if len(op) > 2 else b"") for op in ops])
    pending = []
    for ops in groups:
        tx = zk.transaction()
        tx.check(zk_paths.CONTROLLER_EPOCH, epoch_version)
        for op in ops:
            if op[0] == "create":
                tx.create(op[1], op[2])
            elif op[0] == "set":
                tx.set_data(op[1], op[2], version=op[3])
            elif op[0] == "delete":
                tx.delete(op[1])
            else:
                raise ValueError(f"unknown ZooKeeper op {op[0]!r}")
        pending.append(tx.commit_async())
    out: list[BaseException | None] = []
    moved = False
    for handle in pending:
        results = handle.get(timeout=WRITE_TIMEOUT_S)
        errors = [r for r in results if isinstance(r, BaseException)]
        if not errors:
            out.append(None)
            continue
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            moved = True
        out.append(next((e for e in errors if not isinstance(e, RolledBackError)),
                        errors[0]))
    if moved:
        raise ControllerMovedError(
            f"{zk_paths.CONTROLLER_EPOCH} is no longer at version {epoch_version}: another "
            "broker is the controller")
    return out


def write_states(zk: KazooClient, epoch_version: int,
                 states: dict[TopicPartition, PartitionState], *, create: bool
                 ) -> dict[TopicPartition, PartitionState | None]:
    """Write partition states (creating the znodes, or conditionally on each one's
    `zk_version`). Returns, per partition, the state ZooKeeper now holds: the one written
    (with its new version) or, when a conditional write lost a race, the one read back
    (None: absent or malformed)."""
    from kazoo.exceptions import BadVersionError, NodeExistsError

    items = list(states.items())
    if create:
        results = _create_states(zk, epoch_version, items)
    else:
        results = commit_fenced(zk, epoch_version, [
            [("set", zk_paths.partition_state(t, p), state.to_json(), state.zk_version)]
            for (t, p), state in items])
    out: dict[TopicPartition, PartitionState | None] = {}
    lost: list[TopicPartition] = []
    for (tp, state), error in zip(items, results, strict=True):
        if error is None:
            out[tp] = PartitionState(state.leader, state.leader_epoch, list(state.isr),
                                     state.controller_epoch,
                                     0 if create else state.zk_version + 1)
        elif isinstance(error, (BadVersionError, NodeExistsError)):
            lost.append(tp)
        else:
            raise error
    if lost:
        out.update(zk_topics.read_partition_states(zk, lost))
    return out


def _create_states(zk: KazooClient, epoch_version: int,
                   items: list[tuple[TopicPartition, PartitionState]]
                   ) -> list[BaseException | None]:
    """Create partition state znodes: /brokers/topics/[t]/partitions first (one that exists
    is fine), then per partition one transaction making .../[n] and .../[n]/state; where
    .../[n] existed already the state alone is created."""
    from kazoo.exceptions import NodeExistsError

    topics = sorted({t for (t, _p), _s in items})
    for error in commit_fenced(zk, epoch_version,
                               [[("create", zk_paths.topic_partitions(t), b"")] for t in topics]):
        if error is not None and not isinstance(error, NodeExistsError):
            raise error
    results = commit_fenced(zk, epoch_version, [
        [("create", zk_paths.partition_state(t, p).rsplit("/", 1)[0], b""),
         ("create", zk_paths.partition_state(t, p), state.to_json())]
        for (t, p), state in items])
    again = [i for i, e in enumerate(results) if isinstance(e, NodeExistsError)]
    if again:
        retried = commit_fenced(zk, epoch_version, [
            [("create", zk_paths.partition_state(*items[i][0]), items[i][1].to_json())]
            for i in again])
        for i, error in zip(again, retried, strict=True):
            results[i] = error
    return results


def set_assignment(zk: KazooClient, epoch_version: int, assignment: TopicAssignment) -> int:
    """Replace a topic's znode if nobody changed it since it was read (kazoo's
    BadVersionError otherwise); returns its new version."""
    error = commit_fenced(zk, epoch_version, [[
        ("set", zk_paths.topic(assignment.name), assignment.to_json(),
         assignment.zk_version)]])[0]
    if error is not None:
        raise error
    return assignment.zk_version + 1


def update_assignment(zk: KazooClient, epoch_version: int, topic: str,
                      partitions: dict[int, list[int]], adding: dict[int, list[int]],
                      removing: dict[int, list[int]]) -> None:
    """Rewrite a topic's replica sets and reassignment sets (keeping its id), conditional
    on the version read; a topic gone meanwhile is left alone."""
    assignment = zk_topics.read_assignment(zk, topic)
    if assignment is None:
        return
    assignment.partitions = dict(partitions)
    assignment.adding = dict(adding)
    assignment.removing = dict(removing)
    set_assignment(zk, epoch_version, assignment)


def remove_topic(zk: KazooClient, epoch_version: int, name: str) -> None:
    """The last step of a deletion: the topic's znodes (deepest first), its config, then
    the deletion marker; each delete fenced."""
    from kazoo.exceptions import NoNodeError

    paths = _tree(zk, zk_paths.topic(name))
    paths += [zk_paths.topic_config(name), zk_paths.topic_delete_marker(name)]
    for path in paths:
        error = commit_fenced(zk, epoch_version, [[("delete", path)]])[0]
        if error is not None and not isinstance(error, NoNodeError):
            raise error


def _tree(zk: KazooClient, root: str) -> list[str]:
    """`root` and every znode under it, children before their parent."""
    from kazoo.exceptions import NoNodeError

    try:
        children = zk.get_children(root)
    except NoNodeError:
        return []
    out: list[str] = []
    for child in children:
        out += _tree(zk, f"{root}/{child}")
    return [*out, root]


def read_topics(zk: KazooClient, names: list[str]
                ) -> tuple[dict[str, TopicAssignment], dict[TopicPartition, PartitionState]]:
    """The topics' assignments and the partition states that exist, each kind read
    pipelined (absent or malformed znodes left out)."""
    assignments = {n: a for n, a in zk_topics.read_assignments(zk, names).items()
                   if a is not None}
    tps = [(n, p) for n, a in assignments.items() for p in a.partitions]
    states = {tp: s for tp, s in zk_topics.read_partition_states(zk, tps).items()
              if s is not None}
    return assignments, states


def unclean_election_enabled(zk: KazooClient, topics: Collection[str], broker_id: int,
                             static: bool) -> dict[str, bool]:
    """Each topic's effective unclean.leader.election.enable, as Kafka's controller reads
    it (zkClient.getLogConfigs over its own broker config): the topic's override in
    /config/topics/[t], else this broker's dynamic config /config/brokers/[id], else the
    cluster-wide /config/brokers/<default>, else `static` (server.properties). One
    pipelined round trip."""
    return _read_unclean(zk, topics, broker_id, static)[1]


def broker_unclean_election_enabled(zk: KazooClient, broker_id: int, static: bool) -> bool:
    """The broker-wide unclean.leader.election.enable (a topic's without an override)."""
    return _read_unclean(zk, (), broker_id, static)[0]


def _read_unclean(zk: KazooClient, topics: Collection[str], broker_id: int, static: bool
                  ) -> tuple[bool, dict[str, bool]]:
    paths = {(TOPICS, t): zk_paths.entity_config(TOPICS, t) for t in topics}
    own, default = (BROKERS, str(broker_id)), (BROKERS, zk_paths.DEFAULT_BROKER_ENTITY)
    paths[own] = zk_paths.entity_config(*own)
    paths[default] = zk_paths.entity_config(*default)
    configs = {key: {} if got is None else parse_config(decode_json(got[0], paths[key]))
               for key, got in get_all(zk, paths).items()}
    broker_wide = static
    for layer in (configs[default], configs[own]):  # the later one wins
        if UNCLEAN_KEY in layer:
            broker_wide = _true(layer[UNCLEAN_KEY])
    return broker_wide, {t: _true(configs[(TOPICS, t)][UNCLEAN_KEY])
                         if UNCLEAN_KEY in configs[(TOPICS, t)] else broker_wide
                         for t in topics}


def _true(value: str) -> bool:
    return value.strip().lower() == "true"


def zookeeper_error(e: BaseException) -> bool:
    """An error of ZooKeeper (or of this controller's epoch): the controller cannot act."""
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    return isinstance(e, (KazooException, KazooTimeoutError, ControllerMovedError))
