"""Config changes on a 3-broker ZooKeeper cluster (issue 31): a topic config or a dynamic
broker config changed through one broker is written with a /config/changes notification
and applied by every broker (their logs, not only their answers); DescribeConfigs for any
topic from any broker, hosting it or not; the notification listener applies changes in
order and purges the expired ones as Kafka does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkactl.cluster import zk_paths
from kafkactl.cluster.config_changes import (
    BROKERS,
    TOPICS,
    ConfigChangeListener,
    EntityConfig,
    write_entity_config,
)
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.broker.wire import batch
from tests.cluster.cluster_helpers import Cluster, leaders, request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.compat import test_sarama
from tests.polling import wait_until

TOPIC, BROKER = 2, 4
SET = 0
DYNAMIC_TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 3
PROPAGATION_S = 2.0  # issue 31: a change reaches every broker within 2 s


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: ZooKeeperServer) -> Cluster:
    return start_cluster(broker_factory, zookeeper, log_cleaner_backoff_ms="100")


def create_topic(cluster: Cluster, name: str, assignment: dict[int, list[int]],
                 configs: dict[str, str] | None = None) -> None:
    """CreateTopics with an explicit assignment, sent to the controller; waits for the
    leaders on every broker."""
    # every live broker naming the same controller (one just started may not know it yet)
    controller = cluster.brokers[wait_until(
        lambda: c if (c := cluster.controller()) in cluster.brokers else None, 30,
        "every broker naming the controller")]
    resp = request(controller.port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": p, "broker_ids": b}
                                    for p, b in assignment.items()],
                    "configs": [{"name": k, "value": v}
                                for k, v in (configs or {}).items()]}],
        "timeout_ms": 10000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp
    cluster.wait_for_leaders(name, len(assignment))


def alter_topic(port: int, topic: str, configs: dict[str, str]) -> None:
    resp = request(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
            {"name": k, "config_operation": SET, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


def describe(port: int, rtype: int, name: str) -> dict[str, Any]:
    resp = request(port, ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    return dict(resp["results"][0])


def config_value(port: int, rtype: int, name: str, key: str) -> tuple[str, int] | None:
    r = describe(port, rtype, name)
    assert r["error_code"] == 0, r
    for c in r["configs"]:
        if c["name"] == key:
            return c["value"], c["config_source"]
    return None


def produce_error(port: int, topic: str, partition: int, value: bytes) -> int:
    return _produce(port, topic, batch([value]), partition)


def _produce(port: int, topic: str, records: bytes, partition: int = 0) -> int:
    resp = request(port, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    return int(resp["responses"][0]["partition_responses"][0]["error_code"])


def notifications(zk: Any, chroot: str) -> list[dict[str, Any]]:
    base = f"{chroot}{zk_paths.CONFIG_CHANGES}"
    return [json.loads(zk.get(f"{base}/{c}")[0]) for c in sorted(zk.get_children(base))]


def test_a_topic_config_set_through_one_broker_reaches_every_brokers_logs(
        cluster: Cluster, zk: Any) -> None:
    """max.message.bytes set through broker 1 on a topic with a partition led by each
    broker: each leader refuses a record over the new limit (its log took the change)
    within 2 s, and DescribeConfigs on brokers 2 and 3 says so."""
    create_topic(cluster, "limits", {0: [1], 1: [2], 2: [3]})
    led = leaders(cluster.brokers[1].port, "limits")
    assert sorted(led.values()) == [1, 2, 3]
    big = b"x" * 5000
    for p, leader in led.items():  # each leader took its partition (LeaderAndIsr)
        port = cluster.brokers[leader].port
        wait_until(lambda port=port, p=p: produce_error(port, "limits", p, big) == 0, 10,
                   f"broker {leader} accepting records for limits-{p}")

    alter_topic(cluster.brokers[1].port, "limits", {"max.message.bytes": "2000"})
    assert {"version": 2, "entity_path": "topics/limits"} in notifications(zk, cluster.chroot)
    for p, leader in led.items():
        port = cluster.brokers[leader].port
        wait_until(lambda port=port, p=p: produce_error(port, "limits", p, big) ==
                   ErrorCode.MESSAGE_TOO_LARGE, PROPAGATION_S,
                   f"broker {leader} applying max.message.bytes=2000 to limits-{p}")
    for b in (2, 3):
        assert config_value(cluster.brokers[b].port, TOPIC, "limits", "max.message.bytes") \
            == ("2000", DYNAMIC_TOPIC_CONFIG)

    # a second change, through broker 3: applied after the first, in order
    alter_topic(cluster.brokers[3].port, "limits", {"max.message.bytes": "1000000"})
    for p, leader in led.items():
        port = cluster.brokers[leader].port
        wait_until(lambda port=port, p=p: produce_error(port, "limits", p, big) == 0,
                   PROPAGATION_S, f"broker {leader} applying max.message.bytes=1000000")


def test_retention_set_through_broker_1_is_read_from_brokers_2_and_3(cluster: Cluster) -> None:
    create_topic(cluster, "kept", {0: [1, 2, 3]})
    alter_topic(cluster.brokers[1].port, "kept", {"retention.ms": "123456"})
    for b in (2, 3):
        wait_until(lambda b=b: config_value(cluster.brokers[b].port, TOPIC, "kept",
                                            "retention.ms") == ("123456", DYNAMIC_TOPIC_CONFIG),
                   PROPAGATION_S, f"broker {b} describing retention.ms=123456")


def _cleaned_upto(data_dir: Path, topic: str) -> int:
    cp = data_dir / "cleaner-offset-checkpoint"
    text = cp.read_text() if cp.exists() else ""
    marker = f"{topic} 0 "
    return int(text.split(marker)[1].split()[0]) if marker in text else -1


def test_a_topic_switched_to_compact_through_another_broker_is_compacted_by_its_leader(
        cluster: Cluster) -> None:
    create_topic(cluster, "cmp", {0: [2]}, {
        "segment.bytes": "4000", "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01"})
    keys = 50
    first = _keyed_batch([(b"k0", b"k0=v-1")])
    wait_until(lambda: _produce(cluster.brokers[2].port, "cmp", first) == 0, 10,
               "broker 2 accepting records for cmp-0")
    for round_ in range(4):
        for k in range(0, keys, 10):  # a few records a batch: segments roll between them
            values = [f"k{k + i}=v{round_}".encode() for i in range(10)]
            b = _keyed_batch([(f"k{k + i}".encode(), v) for i, v in enumerate(values)])
            assert _produce(cluster.brokers[2].port, "cmp", b) == 0
    leader_dir = cluster.brokers[2].data_dir
    assert _cleaned_upto(leader_dir, "cmp") == -1  # cleanup.policy=delete: never cleaned

    alter_topic(cluster.brokers[1].port, "cmp", {"cleanup.policy": "compact"})
    wait_until(lambda: _cleaned_upto(leader_dir, "cmp") >= 3 * keys, 60,
               "the leader (broker 2) compacting cmp")
    values = _read_all(cluster.brokers[2].port, "cmp")
    assert {k: v for k, v in values} == {f"k{k}": f"k{k}=v3" for k in range(keys)}
    assert len(values) < 4 * keys  # older versions are gone


def _keyed_batch(records: list[tuple[bytes, bytes]]) -> bytes:
    from kafkactl.record.batch import RecordBatchBuilder

    b = RecordBatchBuilder()
    for key, value in records:
        b.append(None, key, value)
    return b.build()


def _read_all(port: int, topic: str) -> list[tuple[str, str]]:
    """Every record of partition 0, (key, value), in offset order."""
    from kafkactl.record.memory_records import iter_batches

    out: list[tuple[str, str]] = []
    offset = 0
    while True:
        resp = request(port, ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        part = resp["responses"][0]["partitions"][0]
        assert part["error_code"] == 0, part
        for b in iter_batches(memoryview(part["records"] or b"")):
            for r in b:
                if r.offset >= offset and r.key is not None and r.value is not None:
                    out.append((bytes(r.key).decode(), bytes(r.value).decode()))
            offset = max(offset, b.last_offset + 1)
        if offset >= part["high_watermark"]:
            return out


def test_describe_configs_for_every_topic_on_every_broker(cluster: Cluster) -> None:
    """RF=1 topics: most brokers hold no replica of most topics, and every broker still
    answers for every topic, the same answer, without a traceback in its log."""
    topics = {f"t{i}": {0: [1 + i % 3]} for i in range(4)}
    for i, (name, assignment) in enumerate(topics.items()):
        create_topic(cluster, name, assignment,
                     {"retention.ms": str(100000 + i)} if i % 2 == 0 else None)
    answers: dict[str, list[Any]] = {}
    for name in topics:
        for b in cluster.brokers.values():
            r = describe(b.port, TOPIC, name)
            assert r["error_code"] == 0, (b.port, r)
            answers.setdefault(name, []).append(
                sorted((c["name"], c["value"], c["config_source"]) for c in r["configs"]))
        first = answers[name][0]
        assert all(a == first for a in answers[name]), name
    assert ("retention.ms", "100000", DYNAMIC_TOPIC_CONFIG) in answers["t0"][0]
    assert ("retention.ms", "604800000", 5) in answers["t1"][0]  # the broker default
    for b in cluster.brokers.values():
        assert b.log_path is not None
        assert "Traceback" not in b.log_path.read_text()
    missing = describe(cluster.brokers[1].port, TOPIC, "nope")
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_cluster_default_broker_config_reaches_every_broker(cluster: Cluster,
                                                                zk: Any) -> None:
    resp = request(cluster.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": SET, "value": "7654321"}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp
    data, _ = zk.get(f"{cluster.chroot}/config/brokers/<default>")
    assert json.loads(data)["config"] == {"log.retention.ms": "7654321"}
    assert {"version": 2, "entity_path": "brokers/<default>"} in \
        notifications(zk, cluster.chroot)
    for b in (2, 3):
        wait_until(lambda b=b: config_value(cluster.brokers[b].port, BROKER, str(b),
                                            "log.retention.ms")
                   == ("7654321", DYNAMIC_DEFAULT_BROKER_CONFIG), PROPAGATION_S,
                   f"broker {b} taking the cluster default log.retention.ms")


# ---- the listener alone, on a real ZooKeeper -----------------------------------------------
def test_the_listener_applies_changes_in_order_once_and_purges_expired_ones(
        chrooted: Any) -> None:
    zk = chrooted
    seen: list[EntityConfig] = []
    now = [0.0]
    listener = ConfigChangeListener(zk, seen.append, clock=lambda: now[0])
    write_entity_config(zk, TOPICS, "a", {"retention.ms": "1"})
    write_entity_config(zk, TOPICS, "a", {"retention.ms": "2"})
    write_entity_config(zk, BROKERS, "<default>", {"log.retention.ms": "3"})
    zk.create(f"{zk_paths.CONFIG_CHANGES}/{zk_paths.CONFIG_CHANGE_PREFIX}",
              b'{"version":2,"entity_path":"users/alice"}', sequence=True)
    now[0] = zk.get(zk_paths.CONFIG_CHANGES)[1].mtime / 1000  # ZooKeeper's own clock
    listener.start()
    try:
        # what was there is applied, in order, each re-reading the entity's config now
        wait_until(lambda: len(seen) == 3, 10, "the three notifications applied")
        assert [(c.entity_type, c.name, c.config) for c in seen] == [
            (TOPICS, "a", {"retention.ms": "2"}), (TOPICS, "a", {"retention.ms": "2"}),
            (BROKERS, "<default>", {"log.retention.ms": "3"})]
        assert listener.last_applied == 3
        assert len(zk.get_children(zk_paths.CONFIG_CHANGES)) == 4  # none expired yet

        # 15 minutes and a millisecond after the newest of them (by ZooKeeper's clock, once
        # it has moved on), the next notification is applied and the older ones purged
        newest = max(zk.get(f"{zk_paths.CONFIG_CHANGES}/{c}")[1].ctime
                     for c in zk.get_children(zk_paths.CONFIG_CHANGES))

        def clock_moved() -> bool:
            probe = zk.create("/probe-", b"", sequence=True)
            ctime = zk.get(probe)[1].ctime
            zk.delete(probe)
            return bool(ctime > newest + 1)
        wait_until(clock_moved, 10, "ZooKeeper's clock past the notifications' creation")
        now[0] = (newest + 15 * 60 * 1000 + 1) / 1000
        write_entity_config(zk, TOPICS, "b", {"cleanup.policy": "compact"})
        wait_until(lambda: len(seen) == 4, 10, "the fourth notification applied")
        assert (seen[3].name, seen[3].config) == ("b", {"cleanup.policy": "compact"})
        left = wait_until(lambda: (lambda c: c if len(c) == 1 else None)(
            zk.get_children(zk_paths.CONFIG_CHANGES)), 10, "expired notifications purged")
        assert left == [f"{zk_paths.CONFIG_CHANGE_PREFIX}0000000004"]

        # an entity without a config znode (deleted) is reported as such (None)
        zk.delete(zk_paths.topic_config("b"))
        for name in ("c", "b"):
            zk.create(f"{zk_paths.CONFIG_CHANGES}/{zk_paths.CONFIG_CHANGE_PREFIX}",
                      json.dumps({"version": 2, "entity_path": f"topics/{name}"}).encode(),
                      sequence=True)
        wait_until(lambda: len(seen) == 6, 10, "the deletions reported")
        assert [(c.name, c.config) for c in seen[4:]] == [("c", None), ("b", None)]
    finally:
        listener.stop()


def test_the_cli_alters_reach_every_leader(cluster: Cluster) -> None:
    """`topics alter --config` and `configs alter --add-config` through broker 1: every
    leader of the topic applies them (a record over the new limit is refused)."""
    from tests import zygote

    create_topic(cluster, "cli", {0: [1], 1: [2], 2: [3]})
    led = leaders(cluster.brokers[1].port, "cli")
    big = b"x" * 5000
    for p, leader in led.items():
        port = cluster.brokers[leader].port
        wait_until(lambda port=port, p=p: produce_error(port, "cli", p, big) == 0, 10,
                   f"broker {leader} accepting records for cli-{p}")
    for args, limit, refused in (
            (["topics", "alter", "-t", "cli", "--config", "max.message.bytes=3000"],
             "3000", True),
            (["configs", "alter", "--entity-type", "topics", "--entity-name", "cli",
              "--add-config", "max.message.bytes=100000"], "100000", False)):
        r = zygote.run([*args, "-b", cluster.brokers[1].bootstrap], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        want = ErrorCode.MESSAGE_TOO_LARGE if refused else ErrorCode.NONE
        for p, leader in led.items():
            port = cluster.brokers[leader].port
            wait_until(lambda port=port, p=p, want=want:
                       produce_error(port, "cli", p, big) == want,
                       PROPAGATION_S, f"broker {leader} applying max.message.bytes={limit}")


def test_a_broker_down_during_a_change_takes_it_when_it_starts(cluster: Cluster,
                                                               zk: Any) -> None:
    """Broker 3 is stopped while the cluster default changes and a topic's config changes,
    and the notifications are purged meanwhile (as 15 minutes would): started again, it
    reads both from ZooKeeper."""
    create_topic(cluster, "later", {0: [3]})
    b3 = cluster.brokers[3]
    b3.stop()
    resp = request(cluster.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
            {"name": "message.max.bytes", "config_operation": SET, "value": "2500"}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp
    alter_topic(cluster.brokers[2].port, "later", {"max.message.bytes": "1500"})
    base = f"{cluster.chroot}{zk_paths.CONFIG_CHANGES}"
    for child in zk.get_children(base):
        zk.delete(f"{base}/{child}")
    b3.start()
    wait_until(lambda: config_value(b3.port, BROKER, "3", "message.max.bytes")
               == ("2500", DYNAMIC_DEFAULT_BROKER_CONFIG), 30,
               "broker 3 taking the cluster default message.max.bytes")
    cluster.wait_for_leaders("later", 1)
    wait_until(lambda: produce_error(b3.port, "later", 0, b"x" * 2000) ==
               ErrorCode.MESSAGE_TOO_LARGE, 30, "broker 3 leading later-0 with its 1500 limit")


@pytest.fixture
def sarama_probe(tmp_path: Path) -> Path:
    """tests/compat/go/sarama_probe.go built (skipped without go or Sarama)."""
    import os
    import subprocess

    reason = test_sarama._missing()
    if reason:
        pytest.skip(reason)
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "kafkactl-tests" / "go")
    env = dict(os.environ, GO111MODULE="off", GOPATH=str(test_sarama.GOPATH), GOFLAGS="",
               GOCACHE=cache)
    binary = tmp_path / "sarama_probe"
    build = subprocess.run(["go", "build", "-o", str(binary), str(test_sarama.SOURCE)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return binary


def test_sarama_list_topics_on_every_broker_of_a_cluster(cluster: Cluster,
                                                         sarama_probe: Path) -> None:
    """Sarama's ClusterAdmin.ListTopics describes every topic's configs: through each
    broker as its bootstrap, with RF=1 topics most brokers do not host, it lists them all
    (it broke on the first broker hosting no replica of a topic)."""
    for i in range(3):
        create_topic(cluster, f"rf1-{i}", {0: [i + 1]},
                     {"retention.ms": "60000"} if i == 0 else None)
    create_topic(cluster, "sarama-2.2.0", {0: [1, 2, 3]})
    for b in cluster.brokers.values():
        out = test_sarama._run(sarama_probe, b.bootstrap, "2.2.0")
        assert out["produce_error"] == "" and out["admin_error"] == "", (b.port, out)
        assert out["topics_after_acl"] == 4, out
    for b in cluster.brokers.values():
        assert b.log_path is not None and "Traceback" not in b.log_path.read_text()
