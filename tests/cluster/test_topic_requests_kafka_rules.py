"""Topic requests on real brokers and a real ZooKeeper, decided as Kafka's ZooKeeper-mode
code decides them:

- '.'/'_' collisions (AdminZkClient.validateTopicCreate, from ZooKeeper's topic list): an
  earlier topic of the same batch, one created a moment ago and not announced yet, and
  auto-creation through Metadata all count; a topic that exists is TOPIC_ALREADY_EXISTS
  before any collision is looked for;
- a topic named twice in one request is INVALID_REQUEST (KafkaApis);
- CreatePartitions is REASSIGNMENT_IN_PROGRESS while a partition of the topic moves
  (ZkAdminManager.createPartitions), INVALID_TOPIC_EXCEPTION once the topic is queued for
  deletion (KafkaApis.handleCreatePartitionsRequest);
- a topic deleted while a partition of it moves stays (queued) until the move completes,
  then goes, leaving no reassignment behind (KafkaController.processTopicDeletion marks it
  ineligible for deletion; onPartitionReassignment resumes it);
- a ZooKeeper stall: an admin request answered REQUEST_TIMED_OUT has its late outcome
  logged in one line, not as "Future exception was never retrieved"."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from kafkactl.client.admin import BROKER_RESOURCE, AdminClient
from kafkactl.cluster import zk_paths
from kafkactl.cluster.topic_state import TopicAssignment
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import Cluster, metadata, request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

# a replication throttle of 1 byte/s from the start (each broker's static config, every
# replica of the topic throttled from its creation), at most 64 KiB a fetch
THROTTLE = {"replica_fetch_max_bytes": "65536", "leader_replication_throttled_rate": "1",
            "follower_replication_throttled_rate": "1"}
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED = {"leader.replication.throttled.replicas": "*",
             "follower.replication.throttled.replicas": "*"}


def _controller_port(cluster: Cluster) -> int:
    return cluster.brokers[cluster.controller()].port


def _create(port: int, topics: list[tuple[str, dict[int, list[int]] | None]], *,
            timeout_ms: int = 10000, configs: dict[str, str] | None = None
            ) -> list[tuple[str, int, str | None]]:
    """CreateTopics (an entry with no assignment: one partition of one replica)."""
    body = {"topics": [{"name": name, "num_partitions": -1 if a else 1,
                        "replication_factor": -1 if a else 1,
                        "configs": [{"name": k, "value": v}
                                    for k, v in (configs or {}).items()],
                        "assignments": [{"partition_index": p, "broker_ids": b}
                                        for p, b in (a or {}).items()]}
                       for name, a in topics],
            "timeout_ms": timeout_ms, "validate_only": False}
    return [(t["name"], t["error_code"], t["error_message"])
            for t in request(port, ApiKey.CREATE_TOPICS, 5, body, timeout=30)["topics"]]


def _grow(port: int, counts: list[tuple[str, int]]) -> list[tuple[str, int, str | None]]:
    body = {"topics": [{"name": n, "count": c, "assignments": None} for n, c in counts],
            "timeout_ms": 10000, "validate_only": False}
    return [(r["name"], r["error_code"], r["error_message"])
            for r in request(port, ApiKey.CREATE_PARTITIONS, 2, body, timeout=30)["results"]]


def _partitions(port: int, name: str) -> int | None:
    topic = metadata(port, [name])["topics"][0]
    return None if topic["error_code"] else len(topic["partitions"])


def test_dot_underscore_collisions_and_duplicates(broker_factory: Any, zookeeper: ZooKeeperServer,
                                                  zk: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, (1, 2))
    port = _controller_port(cluster)
    other = next(b.port for b in cluster.brokers.values() if b.port != port)
    collides = ErrorCode.INVALID_TOPIC_EXCEPTION

    # one batch: the earlier topic counts
    assert [r[:2] for r in _create(port, [("a.x", None), ("a_x", None)])] == \
        [("a.x", ErrorCode.NONE), ("a_x", collides)]
    # back to back, the first not waited for (timeout 0): it counts once written
    assert [r[:2] for r in _create(port, [("b.x", None)], timeout_ms=0)] == \
        [("b.x", ErrorCode.REQUEST_TIMED_OUT)]
    name, code, message = _create(port, [("b_x", None)])[0]
    assert code == collides and "collides with existing topic 'b.x'" in (message or "")
    # auto-creation through Metadata, on a broker that is not the controller
    cluster.wait_for_leaders("b.x", 1)
    auto = request(other, ApiKey.METADATA, 9, {
        "topics": [{"name": "b_x"}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})["topics"]
    assert [(t["name"], t["error_code"]) for t in auto] == [("b_x", collides)]
    names = set(zk.get_children(cluster.chroot + zk_paths.BROKER_TOPICS))
    assert {"a.x", "b.x"} <= names and not {"a_x", "b_x"} & names

    # both names exist (an older tool wrote the second): existing is said first
    zk.create(cluster.chroot + zk_paths.topic("a_x"),
              TopicAssignment("a_x", {0: [1]}).to_json())
    cluster.wait_for_leaders("a_x", 1)
    assert [r[:2] for r in _create(port, [("a_x", None)])] == \
        [("a_x", ErrorCode.TOPIC_ALREADY_EXISTS)]

    # a topic named twice: every entry of it refused, nothing created
    created = _create(port, [("twice", None), ("once", None), ("twice", None)])
    assert [r[:2] for r in created] == [("twice", ErrorCode.INVALID_REQUEST),
                                        ("once", ErrorCode.NONE),
                                        ("twice", ErrorCode.INVALID_REQUEST)]
    assert created[0][2] == "Found multiple entries for this topic."
    assert "twice" not in set(zk.get_children(cluster.chroot + zk_paths.BROKER_TOPICS))
    assert _grow(port, [("once", 2), ("once", 3)]) == \
        [("once", ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")]
    assert _partitions(port, "once") == 1


@pytest.fixture
def moving(broker_factory: Any, zookeeper: ZooKeeperServer) -> Any:
    """Three brokers; topic `moving` on brokers 1 and 2 holding 300 KB, its partition
    moving to brokers 1 and 3 at a replication throttle of 1 byte/s: a move that stays in
    progress until the throttle is lifted (`release`)."""
    from confluent_kafka import Producer

    cluster = start_cluster(broker_factory, zookeeper, **THROTTLE)
    port = _controller_port(cluster)
    assert [r[:2] for r in _create(port, [("moving", {0: [1, 2]})], configs=THROTTLED)] == \
        [("moving", ErrorCode.NONE)]
    cluster.wait_for_leaders("moving", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 5})
    for _ in range(300):
        producer.produce("moving", b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient(cluster.bootstrap)
    assert admin.alter_partition_reassignments({("moving", 0): [1, 3]}) == \
        {("moving", 0): None}

    def release() -> None:  # the cluster-wide dynamic rate, over the static one
        admin.alter_configs("", dict.fromkeys(RATE_KEYS, "1000000000"),
                            resource_type=BROKER_RESOURCE)

    try:
        assert admin.list_partition_reassignments() == {("moving", 0): ([1, 3, 2], [3], [2])}
        yield cluster, admin, release
    finally:
        admin.close()


def test_create_partitions_is_refused_while_a_partition_moves(moving: Any) -> None:
    cluster, admin, release = moving
    port = _controller_port(cluster)
    name, code, message = _grow(port, [("moving", 2)])[0]
    assert code == ErrorCode.REASSIGNMENT_IN_PROGRESS, message
    assert "reassignment is in progress for the topic 'moving'" in (message or "")
    assert _partitions(port, "moving") == 1
    release()
    wait_until(lambda: admin.list_partition_reassignments() == {}, 30, "the move done")
    assert _grow(port, [("moving", 2)]) == [("moving", ErrorCode.NONE, None)]
    assert cluster.wait_for_leaders("moving", 2)
    replicas = {p["partition_index"]: p["replica_nodes"]
                for p in metadata(port, ["moving"])["topics"][0]["partitions"]}
    assert sorted(replicas[0]) == [1, 3] and len(replicas[1]) == 2  # the target's RF


def test_a_topic_deleted_while_it_moves_goes_once_the_move_is_done(moving: Any) -> None:
    cluster, admin, release = moving
    port = _controller_port(cluster)
    deleted = request(port, ApiKey.DELETE_TOPICS, 4,
                      {"topic_names": ["moving"], "timeout_ms": 1000})["responses"]
    assert [(r["name"], r["error_code"]) for r in deleted] == \
        [("moving", ErrorCode.REQUEST_TIMED_OUT)]
    # queued: still served, still moving, not to be grown, moved elsewhere, nor made again
    assert _partitions(port, "moving") == 1
    assert admin.list_partition_reassignments() == {("moving", 0): ([1, 3, 2], [3], [2])}
    assert _grow(port, [("moving", 2)]) == \
        [("moving", ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")]
    refused = admin.alter_partition_reassignments({("moving", 0): [2, 3]})[("moving", 0)]
    assert refused is not None and refused.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    name, code, message = _create(port, [("moving", None)])[0]
    assert code == ErrorCode.TOPIC_ALREADY_EXISTS and "reassignment" in (message or "")

    release()
    wait_until(lambda: all(_partitions(b.port, "moving") is None for b in cluster.live()),
               30, "the topic deleted once its move is done")
    assert admin.list_partition_reassignments() == {}
    # made again once its znodes are gone too (each broker confirmed its replica deleted)
    made = wait_until(lambda: [r for r in _create(port, [("moving", None)])
                               if r[1] != ErrorCode.TOPIC_ALREADY_EXISTS], 30,
                      "the name free again")
    assert made == [("moving", ErrorCode.NONE, None)]
    cluster.wait_for_leaders("moving", 1)
    assert admin.list_partition_reassignments() == {}


def test_create_partitions_of_a_topic_whose_deletion_waits_for_a_broker(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper)
    port = _controller_port(cluster)
    assert [r[:2] for r in _create(port, [("queued", {0: [1, 2]})])] == \
        [("queued", ErrorCode.NONE)]
    cluster.wait_for_leaders("queued", 1)
    away = 2 if cluster.controller() != 2 else 1
    cluster.brokers[away].kill()
    wait_until(lambda: len(metadata(port, [])["brokers"]) == 2, 30, f"broker {away} gone")
    deleted = request(port, ApiKey.DELETE_TOPICS, 4,
                      {"topic_names": ["queued"], "timeout_ms": 5000})["responses"]
    assert [(r["name"], r["error_code"]) for r in deleted] == [("queued", ErrorCode.NONE)]
    assert _grow(port, [("queued", 3)]) == \
        [("queued", ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")]


def test_a_zookeeper_stall_leaves_one_log_line_per_late_admin_job(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, own_zookeeper, (1,))
    broker = cluster.brokers[1]
    assert own_zookeeper.proc is not None
    own_zookeeper.proc.send_signal(signal.SIGSTOP)
    try:
        # ZooKeeper answers nothing: a CreateTopics waits ZK_ANSWER_MIN_S (10 s), then is
        # REQUEST_TIMED_OUT (the first may fail sooner, when the connection is lost)
        codes = []
        for i in range(4):
            codes.append(_create(broker.port, [(f"stall{i}", None)], timeout_ms=1000)[0][1])
            if codes[-1] == ErrorCode.REQUEST_TIMED_OUT:
                break
        assert codes[-1] == ErrorCode.REQUEST_TIMED_OUT, codes
    finally:
        own_zookeeper.proc.send_signal(signal.SIGCONT)
    # ZooKeeper back: the job ends (done, or failed: the session may have expired)
    wait_until(lambda: "answered REQUEST_TIMED_OUT, " in broker.log(), 30,
               "the late outcome logged")
    lines = broker.log().splitlines()
    assert not [line for line in lines if "Future exception was never retrieved" in line]
    late = [i for i, line in enumerate(lines) if "answered REQUEST_TIMED_OUT, " in line]
    assert all(not lines[i + 1].startswith("Traceback") for i in late if i + 1 < len(lines))
