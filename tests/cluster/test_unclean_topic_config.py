"""Unclean leader election follows each topic's effective unclean.leader.election.enable
(Kafka's PartitionStateMachine.collectUncleanLeaderElectionState): the topic's override,
else the controller broker's dynamic config, else the cluster default, else its
server.properties. The controller asks only about partitions that need it (no live in-sync
replica, a live out-of-sync one), and elects at once when a topic's setting or the cluster
default's turns true (KafkaController's TopicUncleanLeaderElectionEnable and
UncleanLeaderElectionEnable, sent by the broker's config change handlers).

Pure decisions with per-topic answers, the ZooKeeper read's precedence, and one 3-broker
cluster: a partition whose in-sync replicas died gets its live out-of-sync replica as
leader once its topic sets the key true, another once the cluster default does, and a
third that overrides it false stays offline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkactl.cluster import controller_decisions as decisions
from kafkactl.cluster import controller_zk, zk_paths
from kafkactl.cluster.broker_registry import BrokerInfo
from kafkactl.cluster.config_changes import BROKERS, TOPICS, write_entity_config
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.topic_state import PartitionState
from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.cluster_helpers import Cluster, leaders, metadata, request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

KEY = "unclean.leader.election.enable"
TOPIC_RESOURCE, BROKER_RESOURCE, SET = 2, 4, 0


def _view(live: tuple[int, ...], assignments: dict[str, dict[int, list[int]]]) -> ClusterView:
    return ClusterView(1, 3, brokers={b: BrokerInfo(b, "127.0.0.1", 9090 + b, epoch=b)
                                      for b in live},
                       assignments=assignments)


def _asker(enabled: set[str]) -> tuple[set[str], Callable[[str], bool]]:
    asked: set[str] = set()

    def unclean(topic: str) -> bool:
        asked.add(topic)
        return topic in enabled
    return asked, unclean


def test_a_broker_change_elects_uncleanly_only_in_topics_that_allow_it() -> None:
    """Broker 1 dies. "on" and "off" had it as their only in-sync replica, with live
    replica 2 out of sync: "on" (unclean allowed) is led by 2, "off" stays offline keeping
    its ISR. "synced" has 2 in its ISR and "alone" no live replica: neither asks."""
    view = _view((2, 3), {"on": {0: [1, 2]}, "off": {0: [1, 2]}, "synced": {0: [1, 2]},
                          "alone": {0: [1]}})
    view.states = {("on", 0): PartitionState(1, 4, [1], 3, 7),
                   ("off", 0): PartitionState(1, 4, [1], 3, 7),
                   ("synced", 0): PartitionState(1, 4, [1, 2], 3, 7),
                   ("alone", 0): PartitionState(1, 4, [1], 3, 7)}
    asked, unclean = _asker({"on"})
    changed = decisions.broker_change_states(view, {1}, 5, unclean=unclean, shutting_down=())
    assert asked == {"on", "off"}
    assert changed == {("on", 0): PartitionState(2, 5, [2], 5, 7),
                       ("off", 0): PartitionState(-1, 5, [1], 5, 7),
                       ("synced", 0): PartitionState(2, 5, [2], 5, 7),
                       ("alone", 0): PartitionState(-1, 5, [1], 5, 7)}
    # one answer for every topic still works (the ElectLeaders and old callers' way)
    assert decisions.broker_change_states(view, {1}, 5, unclean=False, shutting_down=())[
        ("on", 0)] == PartitionState(-1, 5, [1], 5, 7)


def test_offline_partitions_start_and_log_dir_failures_ask_per_topic() -> None:
    """start_states (a replica came back, or the setting turned true) and a replica in an
    offline log dir follow each topic's answer; a broker shutting down is not eligible,
    so a partition whose only live replica is stopping does not ask."""
    view = _view((2, 3), {"on": {0: [1, 2], 1: [1, 3]}, "off": {0: [1, 2]}})
    view.states = {("on", 0): PartitionState(-1, 4, [1], 3, 7),
                   ("on", 1): PartitionState(-1, 4, [1], 3, 7),
                   ("off", 0): PartitionState(-1, 4, [1], 3, 7)}
    asked, unclean = _asker({"on"})
    created, elected = decisions.start_states(view, sorted(view.states), 5, unclean=unclean,
                                              shutting_down=(3,))
    assert asked == {"on", "off"} and created == {}
    assert elected == {("on", 0): PartitionState(2, 5, [2], 5, 7)}  # on-1: only 3, stopping

    asked, unclean = _asker({"on"})
    created, elected = decisions.start_states(view, [("on", 1)], 5, unclean=unclean,
                                              shutting_down=(3,))
    assert (asked, created, elected) == (set(), {}, {})

    # broker 2 leads "on"-0 and "off"-0 alone in their ISR; its log dir fails; 1 is back
    view = _view((1, 2), {"on": {0: [2, 1]}, "off": {0: [2, 1]}})
    view.states = {("on", 0): PartitionState(2, 4, [2], 3, 7),
                   ("off", 0): PartitionState(2, 4, [2], 3, 7)}
    view.offline_replicas[2] = {("on", 0), ("off", 0)}
    asked, unclean = _asker({"on"})
    changed = decisions.offline_replica_states(view, 2, view.offline_replicas[2], 5,
                                               unclean=unclean, shutting_down=())
    assert asked == {"on", "off"}
    assert changed == {("on", 0): PartitionState(1, 5, [1], 5, 7),
                       ("off", 0): PartitionState(-1, 5, [2], 5, 7)}


def test_the_effective_setting_topic_then_own_broker_then_default_then_static(
        chrooted: Any) -> None:
    zk = chrooted
    read = controller_zk.unclean_election_enabled
    assert read(zk, ["a", "b"], 1, False) == {"a": False, "b": False}  # nothing in ZooKeeper
    assert read(zk, ["a"], 1, True) == {"a": True}  # server.properties
    write_entity_config(zk, TOPICS, "a", {KEY: "true", "retention.ms": "5"})
    write_entity_config(zk, TOPICS, "b", {"retention.ms": "5"})
    write_entity_config(zk, TOPICS, "c", {KEY: "false"})
    assert read(zk, ["a", "b", "c"], 1, False) == {"a": True, "b": False, "c": False}
    write_entity_config(zk, BROKERS, zk_paths.DEFAULT_BROKER_ENTITY, {KEY: "true"})
    assert read(zk, ["a", "b", "c"], 1, False) == {"a": True, "b": True, "c": False}
    assert controller_zk.broker_unclean_election_enabled(zk, 1, False)
    write_entity_config(zk, BROKERS, "1", {KEY: "false"})  # broker 1's own layer
    assert read(zk, ["a", "b"], 1, True) == {"a": True, "b": False}
    assert read(zk, ["b"], 2, False) == {"b": True}  # broker 2 has no layer of its own
    assert not controller_zk.broker_unclean_election_enabled(zk, 1, True)


# ---- a 3-broker cluster ---------------------------------------------------------------------
def _create(cluster: Cluster, name: str, replicas: list[int],
            configs: dict[str, str] | None = None) -> None:
    controller = cluster.brokers[wait_until(
        lambda: c if (c := cluster.controller()) in cluster.brokers else None, 30,
        "every broker naming the controller")]
    resp = request(controller.port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 10000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp


def _alter(port: int, rtype: int, name: str, configs: dict[str, str]) -> None:
    resp = request(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "config_operation": SET, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


def _partition(port: int, topic: str) -> tuple[int, list[int]]:
    md = metadata(port, [topic])
    p = md["topics"][0]["partitions"][0]
    return p["leader_id"], sorted(p["isr_nodes"])


def test_a_topic_or_the_cluster_default_turning_unclean_on_elects_at_once(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    """Four topics on brokers 1 and 2 (1 first): 2 stops (the ISRs shrink to 1), 1 is
    killed (leaderless, ISR [1]). "late" sets the key true while no replica is live: 2,
    back out of sync, leads it as soon as it joins (the broker change reads the topic's
    setting). Setting the key true on "t" then elects 2 there at once; "d" and "kept" stay
    offline. The cluster default true then elects 2 for "d"; "kept" overrides it false
    and stays offline."""
    cluster = start_cluster(broker_factory, zookeeper, (1, 2, 3))
    topics = ("t", "d", "kept", "late")
    for name in topics:
        _create(cluster, name, [1, 2], {KEY: "false"} if name == "kept" else None)
    for name in topics:
        cluster.wait_for_leaders(name, 1, expect=lambda led: led == {0: 1})
    three = cluster.brokers[3].port
    cluster.brokers[2].stop()
    wait_until(lambda: all(_partition(three, n) == (1, [1]) for n in topics), 30,
               "the ISRs shrunk to broker 1")
    cluster.brokers[1].kill()
    wait_until(lambda: all(_partition(three, n)[0] == -1 for n in topics), 30,
               "the partitions offline")
    _alter(three, TOPIC_RESOURCE, "late", {KEY: "true"})
    cluster.brokers[2].start()
    wait_until(lambda: {b["node_id"] for b in metadata(three, [])["brokers"]} == {2, 3}, 30,
               "broker 2 back in the controller's metadata")
    assert all(leaders(three, n) == {0: -1} for n in topics[:3])  # out of sync: no leader
    wait_until(lambda: leaders(three, "late") == {0: 2}, 15, "broker 2 elected for late")

    _alter(three, TOPIC_RESOURCE, "t", {KEY: "true"})
    wait_until(lambda: leaders(three, "t") == {0: 2}, 15, "broker 2 elected for t")
    assert _partition(three, "t") == (2, [2])
    assert leaders(three, "d") == leaders(three, "kept") == {0: -1}

    _alter(three, BROKER_RESOURCE, "", {KEY: "true"})
    wait_until(lambda: leaders(three, "d") == {0: 2}, 15, "broker 2 elected for d")
    cluster.wait_for_leaders("d", 1, expect=lambda led: led == {0: 2})
    assert leaders(three, "kept") == {0: -1}
