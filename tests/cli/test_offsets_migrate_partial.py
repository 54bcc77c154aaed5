"""`kafkactl offsets migrate` when part of it cannot be done: a partition whose log range
cannot be read (no leader: its only replica's broker is down) is one failed row, every
other partition and group is migrated and reported, the exit status says something
failed, and --delete-source keeps that group's source; a group whose ZooKeeper-coordinated
consumers are still registered (/consumers/G/ids) is refused for --delete-source and
warned about otherwise, naming the members."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.producer import Producer
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.cluster_helpers import leaders, start_cluster
from tests.cluster.zk import ZooKeeperServer, available
from tests.polling import wait_until


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


def kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=180)


def broker_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    sc = SimpleConsumer(bootstrap)
    try:
        return {tp: o for tp, o in GroupAdmin(sc.client).fetch_offsets(group).items()
                if o >= 0}
    finally:
        sc.close()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = Producer(bootstrap_servers=bootstrap, linger_ms=1)
    try:
        for f in [p.send(topic, b"r", partition=part) for part in range(partitions)
                  for _ in range(per_partition)]:
            f.result(30)
    finally:
        p.close()


def test_a_partition_without_leader_is_one_failed_row(broker_factory: Any,
                                                      zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2))
    b1 = cluster.brokers[1]
    for topic, assignment in (("ev", "1"), ("solo", "2")):
        r = kafkactl("topics", "create", "-t", topic, "--replica-assignment", assignment,
                     "-b", b1.bootstrap)
        assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("ev", 1)
    produce(b1.bootstrap, "ev", 1, 5)
    zk = zkmod.connect(cluster.zookeeper_connect, timeout_s=10)
    try:
        registry.write_offsets(zk, "offl", {("ev", 0): 1, ("solo", 0): 0})
        registry.write_offsets(zk, "offl2", {("solo", 0): 0})  # (met again: not waited)
        registry.write_offsets(zk, "zafter", {("ev", 0): 2})
        # solo's only replica goes away (before __consumer_offsets exists: it is made on
        # broker 1 when the migration first asks for a coordinator)
        cluster.brokers[2].kill()
        wait_until(lambda: leaders(b1.port, "solo") == {0: -1}, 60, "solo-0 leaderless")

        r = kafkactl("offsets", "migrate", "--zookeeper", cluster.zookeeper_connect,
                     "-b", b1.bootstrap, "-G", "offl", "-G", "offl2", "-G", "zafter",
                     "--delete-source")
        assert r.returncode == 1, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        solo = [line for line in lines if line.split()[:2] == ["solo", "0"]]
        assert len(solo) == 2 and all("failed" in x and "no leader" in x for x in solo), \
            r.stdout
        assert "group offl: 1 failed, 1 migrated" in lines, r.stdout
        assert "group offl2: 1 failed" in lines, r.stdout
        assert "group zafter: 1 migrated" in lines, r.stdout
        assert "migrated (source deleted)" in r.stdout  # zafter's row
        assert "error: group offl: kept the ZooKeeper offsets: not every partition " \
               "verified" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        # everything that could move did; offl's source is kept whole, zafter's deleted
        assert broker_offsets(b1.bootstrap, "offl") == {("ev", 0): 1}
        assert broker_offsets(b1.bootstrap, "zafter") == {("ev", 0): 2}
        assert {tp: s.offset for tp, s in registry.read_offsets(zk, "offl").items()} == \
            {("ev", 0): 1, ("solo", 0): 0}
        assert registry.read_offsets(zk, "zafter") == {}
        assert len(registry.read_offsets(zk, "offl2")) == 1
    finally:
        zkmod.close(zk)


@pytest.fixture
def zk_env(broker_factory: Any, zookeeper: ZooKeeperServer) -> Iterator[tuple[Any, str, Any]]:
    chroot = f"{zookeeper.connect}/oml-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=chroot, num_partitions="3",
                       group_initial_rebalance_delay_ms="0")
    zk = zkmod.connect(chroot, timeout_s=10)
    try:
        wait_until(lambda: zk.exists("/brokers/ids/0"), 30, "broker registration")
        yield b, chroot, zk
    finally:
        zkmod.close(zk)


def test_live_zookeeper_consumers_block_delete_source(zk_env: Any) -> None:
    from tests.cluster.test_zookeeper_consumer import Runner

    b, chroot, zk = zk_env
    produce(b.bootstrap, "ev", 3, 4)
    member = Runner(chroot, "zkg2", "ev")
    try:
        wait_until(lambda: len(member.values) == 12, 60, "the ZooKeeper consumer's records")
        wait_until(lambda: {tp: s.offset for tp, s in registry.read_offsets(zk, "zkg2").items()}
                   == {("ev", p): 4 for p in range(3)}, 60, "its offsets in ZooKeeper")
        (cid,) = registry.members(zk, "zkg2")
        consumer_id = cid.consumer_id

        r = kafkactl("offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap,
                     "-G", "zkg2", "--delete-source")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "live ZooKeeper consumers" in r.stderr and consumer_id in r.stderr, r.stderr
        assert "--delete-source refused" in r.stderr and "stop them first" in r.stderr
        assert "--dual-commit" in r.stderr
        assert "(source deleted)" not in r.stdout
        assert len(registry.read_offsets(zk, "zkg2")) == 3  # kept
        assert broker_offsets(b.bootstrap, "zkg2") == {}  # nothing committed either

        # a plain migration goes ahead (a snapshot), warned about
        r = kafkactl("offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap,
                     "-G", "zkg2", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        (group,) = json.loads(r.stdout)["groups"]
        assert consumer_id in group["warning"] and "keep moving" in group["warning"]
        assert broker_offsets(b.bootstrap, "zkg2") == {("ev", p): 4 for p in range(3)}
        r = kafkactl("offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap,
                     "-G", "zkg2", "--dry-run")
        assert r.returncode == 0, r.stderr
        assert f"warning: group zkg2: group 'zkg2' has live ZooKeeper consumers " \
               f"(/consumers/zkg2/ids: {consumer_id})" in r.stderr, r.stderr
    finally:
        member.close()

    # its consumers stopped (their ids gone): --delete-source deletes
    wait_until(lambda: registry.members(zk, "zkg2") == [], 30, "the member's ids znode gone")
    r = kafkactl("offsets", "migrate", "--zookeeper", chroot, "-b", b.bootstrap, "-G", "zkg2",
                 "--delete-source")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in r.stderr
    assert registry.read_offsets(zk, "zkg2") == {}
