"""Three `kafkactl serve` processes on one real ZooKeeper form a cluster: a controller,
topics spread over the brokers, every broker answering Metadata for the whole cluster,
clients bootstrapped anywhere reaching every leader, and the faults an operator meets
(controller killed, broker killed and restarted, SIGTERM, bad requests)."""

from __future__ import annotations

import json
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.cluster.cluster_helpers import (
    SESSION_TIMEOUT_MS,
    leaders,
    metadata,
    request,
    start_cluster,
)
from tests.polling import wait_until


def kafkactl(*args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout, **kw)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    r = kafkactl("topics", "create", "-b", bootstrap, "-t", name, "--partitions", str(partitions))
    assert r.returncode == 0, r.stderr


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper)


def test_topic_spreads_and_clients_reach_every_leader_from_any_broker(cluster, zk) -> None:
    b1, b2, b3 = cluster.brokers[1], cluster.brokers[2], cluster.brokers[3]
    create_topic(b2.bootstrap, "orders", 12)
    lead = cluster.wait_for_leaders("orders", 12)
    assert Counter(lead.values()) == {1: 4, 2: 4, 3: 4}
    state = json.loads(zk.get(f"{cluster.chroot}/brokers/topics/orders/partitions/0/state")[0])
    assert state["leader"] == lead[0] and state["isr"] == [lead[0]]
    assert state["controller_epoch"] >= 1
    # each broker holds the logs of the partitions it leads, and only those
    for bid, b in cluster.brokers.items():
        dirs = {p.name for p in b.data_dir.iterdir() if p.name.startswith("orders-")}
        assert dirs == {f"orders-{p}" for p, leader in lead.items() if leader == bid}

    lines = [f"line-{i}" for i in range(600)]
    r = subprocess.run(["kcat", "-P", "-b", b1.bootstrap, "-t", "orders", "-K:"],
                       input="".join(f"k{i}:{v}\n" for i, v in enumerate(lines)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-C", "-b", b3.bootstrap, "-t", "orders", "-e", "-q",
                        "-f", "%p %s\n"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = r.stdout.splitlines()
    assert sorted(line.split(" ", 1)[1] for line in got) == sorted(lines)
    assert len({line.split(" ", 1)[0] for line in got}) == 12

    # a consumer group through one broker: the coordinator may live on another
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": b3.bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    seen: list[str] = []
    try:
        def drained() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value().decode())
            return len(seen) >= len(lines)
        wait_until(drained, 60, "the group consumer to read every record", interval=0)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(lines)
    # the committed offsets, read through another broker: lag 0 on every partition
    r = kafkactl("offsets", "show", "-b", b1.bootstrap, "-G", "g1", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 12 and all(row["lag"] == 0 for row in rows)
    assert sum(row["current_offset"] for row in rows) == len(lines)


def test_requests_for_partitions_or_admin_work_elsewhere_are_redirected(cluster) -> None:
    create_topic(cluster.brokers[1].bootstrap, "t", 3)
    lead = cluster.wait_for_leaders("t", 3)
    p, leader = next(iter(lead.items()))
    other = next(b for bid, b in cluster.brokers.items() if bid != leader)
    resp = request(other.port, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": p, "records": None}]}]})
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetch = request(other.port, ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1024}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    assert fetch["responses"][0]["partitions"][0]["error_code"] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER

    controller = cluster.controller()
    non_controller = next(b for bid, b in cluster.brokers.items() if bid != controller)
    resp = request(non_controller.port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": "x", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout_ms": 5000,
        "validate_only": False})
    assert resp["topics"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
    # more replicas than live brokers: refused with the reason
    resp = request(cluster.brokers[controller].port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": "y", "num_partitions": 1, "replication_factor": 4,
                    "assignments": [], "configs": []}], "timeout_ms": 5000,
        "validate_only": False})
    assert resp["topics"][0]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "larger than the 3 live brokers" in resp["topics"][0]["error_message"]


def test_controller_failover_and_a_topic_created_afterwards(cluster) -> None:
    first = cluster.controller()
    cluster.brokers[first].kill()
    wait_until(lambda: cluster.controller() not in (-1, first),
               SESSION_TIMEOUT_MS / 1000 + 15, "a new controller")
    survivors = cluster.live()
    create_topic(survivors[0].bootstrap, "after", 4)
    lead = cluster.wait_for_leaders("after", 4)
    assert set(lead.values()) == {b for b in cluster.brokers if b != first}
    r = kafkactl("cluster", "describe", "-b", survivors[1].bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["controller_id"] == cluster.controller()
    assert sorted(b["id"] for b in doc["brokers"]) == sorted(
        b for b in cluster.brokers if b != first)


def test_dead_broker_partitions_go_offline_then_return_with_their_data(cluster) -> None:
    create_topic(cluster.brokers[1].bootstrap, "events", 6)
    lead = cluster.wait_for_leaders("events", 6)
    victim = next(b for b in (1, 2, 3) if b != cluster.controller())
    r = subprocess.run(["kcat", "-P", "-b", cluster.bootstrap, "-t", "events"],
                       input="".join(f"e{i}\n" for i in range(300)), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.brokers[victim].kill()
    offline = {p for p, leader in lead.items() if leader == victim}
    cluster.wait_for_leaders(
        "events", 6, timeout=SESSION_TIMEOUT_MS / 1000 + 15,
        expect=lambda now: {p for p, leader in now.items() if leader == -1} == offline)
    r = kafkactl("cluster", "describe", "-b", cluster.brokers[cluster.controller()].bootstrap,
                 "--json")
    assert json.loads(r.stdout)["offline_partitions"] == {"events": sorted(offline)}
    cluster.brokers[victim].start()
    cluster.wait_for_leaders("events", 6, expect=lambda now: now == lead)
    r = subprocess.run(["kcat", "-C", "-b", cluster.bootstrap, "-t", "events", "-e", "-q"],
                       capture_output=True, text=True, timeout=60)
    assert sorted(r.stdout.split()) == sorted(f"e{i}" for i in range(300))


def test_sigterm_is_a_controlled_shutdown_and_deletion_reaches_every_broker(cluster, zk) -> None:
    create_topic(cluster.brokers[1].bootstrap, "gone", 6)
    cluster.wait_for_leaders("gone", 6)
    r = kafkactl("topics", "delete", "-b", cluster.bootstrap, "-t", "gone")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: zk.exists(f"{cluster.chroot}/brokers/topics/gone") is None and
               zk.exists(f"{cluster.chroot}/admin/delete_topics/gone") is None, 30,
               "the deletion to finish in ZooKeeper")
    for b in cluster.brokers.values():
        # each replica's log is renamed <topic>-<p>.<uuid>-delete (removed later, as Kafka)
        wait_until(lambda b=b: not any(p.name.startswith("gone-") and
                                       not p.name.endswith("-delete")
                                       for p in b.data_dir.iterdir()), 30, "the logs to go")
        assert leaders(b.port, "gone") == {}
    victim = next(b for b in (1, 2, 3) if b != cluster.controller())
    assert cluster.brokers[victim].stop() == 0
    assert "controlled shutdown" in cluster.brokers[victim].log()
    wait_until(lambda: all(len(metadata(b.port, [])["brokers"]) == 2 for b in cluster.live()),
               10, "the stopped broker to leave every broker's metadata")


def test_readme_recipe_three_server_properties(tmp_path: Path, zookeeper) -> None:
    """The README's three-machine recipe, on one machine with three ports."""
    from tests.conftest import BrokerProcess, free_port

    chroot = "/recipe"
    brokers = []
    try:
        for i in (1, 2, 3):
            data = tmp_path / f"broker{i}"
            data.mkdir()
            port = free_port()
            props = tmp_path / f"server-{i}.properties"
            props.write_text(
                f"broker.id={i}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                f"log.dirs={data}\nzookeeper.connect={zookeeper.connect}{chroot}\n"
                "num.partitions=3\ndefault.replication.factor=1\n")
            b = BrokerProcess(data, port, extra_args=["--config", str(props)])
            b.start()
            brokers.append(b)
        wait_until(lambda: all(len(metadata(b.port, [])["brokers"]) == 3 for b in brokers), 30,
                   "three brokers in every broker's metadata")
        boot = ",".join(b.bootstrap for b in brokers)
        r = subprocess.run(["kcat", "-P", "-b", boot, "-t", "recipe"], input="a\nb\nc\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["kcat", "-C", "-b", boot, "-t", "recipe", "-e", "-q"],
                           capture_output=True, text=True, timeout=60)
        assert sorted(r.stdout.split()) == ["a", "b", "c"]
        lead = leaders(brokers[0].port, "recipe")
        assert len(lead) == 3 and len(set(lead.values())) == 3
    finally:
        for b in brokers:
            b.kill()


def test_malformed_topic_znode_is_skipped_and_the_cluster_goes_on(cluster, zk) -> None:
    zk.create(f"{cluster.chroot}/brokers/topics/broken", b"{not json")
    zk.create(f"{cluster.chroot}/brokers/topics/odd", b'{"partitions": {"0": "x"}}')
    create_topic(cluster.brokers[1].bootstrap, "fine", 2)
    cluster.wait_for_leaders("fine", 2)
    assert leaders(cluster.brokers[2].port, "broken") == {}
    for b in cluster.live():
        assert b.proc is not None and b.proc.poll() is None


def test_session_expiry_offline_then_the_broker_takes_its_partitions_back(cluster) -> None:
    """SIGSTOP a broker past zookeeper.session.timeout.ms: its registration expires and
    its partitions go offline; on SIGCONT it registers again (no restart) and the
    controller gives them back to it."""
    import signal

    create_topic(cluster.brokers[1].bootstrap, "paused", 6)
    lead = cluster.wait_for_leaders("paused", 6)
    victim = next(b for b in (1, 2, 3) if b != cluster.controller())
    proc = cluster.brokers[victim].proc
    assert proc is not None
    mine = {p for p, leader in lead.items() if leader == victim}
    others = [b for i, b in cluster.brokers.items() if i != victim]
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: all({p for p, leader in leaders(b.port, "paused").items()
                                if leader == -1} == mine for b in others),
                   SESSION_TIMEOUT_MS / 1000 + 20, "its partitions offline")
    finally:
        proc.send_signal(signal.SIGCONT)
    cluster.wait_for_leaders("paused", 6, timeout=40, expect=lambda now: now == lead)
    r = subprocess.run(["kcat", "-P", "-b", cluster.bootstrap, "-t", "paused"],
                       input="".join(f"v{i}\n" for i in range(60)), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-C", "-b", cluster.bootstrap, "-t", "paused", "-e", "-q"],
                       capture_output=True, text=True, timeout=60)
    assert sorted(r.stdout.split()) == sorted(f"v{i}" for i in range(60))


def test_zookeeper_restart_under_a_running_cluster(broker_factory, tmp_path: Path) -> None:
    """ZooKeeper stopped past the session timeout and started again: the brokers register
    again, a controller is elected, and the cluster goes on (old topics served, new ones
    created)."""
    import time

    from tests.cluster.zk import ZooKeeperServer, available

    if available() is not None:
        pytest.skip(str(available()))
    server = ZooKeeperServer(tmp_path / "own-zk")
    server.start()
    try:
        cluster = start_cluster(broker_factory, server)
        create_topic(cluster.brokers[1].bootstrap, "before", 3)
        cluster.wait_for_leaders("before", 3)
        server.stop()
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)  # ZooKeeper is away past the timeout
        server.start()
        wait_until(lambda: cluster.controller() in cluster.brokers and all(
            len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 60,
            "every broker back in every broker's metadata")
        create_topic(cluster.brokers[2].bootstrap, "after", 3)
        cluster.wait_for_leaders("after", 3)
        cluster.wait_for_leaders("before", 3)
        r = subprocess.run(["kcat", "-P", "-b", cluster.bootstrap, "-t", "before"],
                           input="x\ny\n", capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        server.stop()


def test_a_standalone_data_dir_joins_a_cluster_with_its_topics(broker_factory, zookeeper,
                                                             zk) -> None:
    """A standalone broker's topics (and their records) are registered when it first starts
    with zookeeper.connect; afterwards ZooKeeper alone says which topics exist."""
    import uuid

    b = broker_factory(num_partitions="2")
    r = subprocess.run(["kcat", "-P", "-b", b.bootstrap, "-t", "legacy"], input="old1\nold2\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    b.stop()
    chroot = f"/adopt-{uuid.uuid4().hex[:8]}"
    b.overrides.update({"zookeeper.connect": zookeeper.connect + chroot,
                        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    b.start()
    wait_until(lambda: leaders(b.port, "legacy") == {0: 0, 1: 0}, 30, "the adopted topic")
    assert json.loads(zk.get(f"{chroot}/brokers/topics/legacy")[0])["partitions"] == {
        "0": [0], "1": [0]}
    assert (b.data_dir / "topic-metadata.json.adopted").exists()
    r = subprocess.run(["kcat", "-C", "-b", b.bootstrap, "-t", "legacy", "-e", "-q"],
                       capture_output=True, text=True, timeout=60)
    assert sorted(r.stdout.split()) == ["old1", "old2"]


def test_a_stalled_zookeeper_holds_up_the_topic_request_not_the_broker(
        broker_factory: Any, tmp_path: Path) -> None:
    """ZooKeeper frozen (SIGSTOP) while the controller handles a CreateTopics, a Metadata
    request that auto-creates a topic, a CreateAcls, an AlterUserScramCredentials and the
    first FindCoordinator (which creates __consumer_offsets): each waits on a worker
    thread, the broker answers its other clients meanwhile, and all are done once
    ZooKeeper is back. Ordering is asserted, never timing (the long session keeps the
    broker's ZooKeeper client from giving up meanwhile)."""
    import os
    import signal
    import socket

    from kafkactl.protocol import codec
    from tests.cluster.zk import ZooKeeperServer, available

    if available() is not None:
        pytest.skip(str(available()))
    server = ZooKeeperServer(tmp_path / "own-zk")
    server.start()
    assert server.proc is not None
    try:
        cluster = start_cluster(broker_factory, server, ids=(1,),
                                zookeeper_session_timeout_ms="30000",
                                authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                                super_users="User:ANONYMOUS",
                                offsets_topic_replication_factor="1",
                                offsets_topic_num_partitions="3")
        port = cluster.brokers[1].port
        body = {"topics": [{"name": "while-frozen", "num_partitions": 1,
                            "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout_ms": 30_000, "validate_only": False}
        versions = codec.encode_request(ApiKey.API_VERSIONS, 0, 2, "t", {})

        def answer(s: socket.socket) -> bytes:
            (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
            return s.recv(size, socket.MSG_WAITALL)

        auto = codec.encode_request(ApiKey.METADATA, 9, 1, "t", {
            "topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        acl = codec.encode_request(ApiKey.CREATE_ACLS, 3, 1, "t", {"creations": [{
            "resource_type": 2, "resource_name": "while-frozen", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})
        with socket.create_connection(("127.0.0.1", port), timeout=60) as creator, \
                socket.create_connection(("127.0.0.1", port), timeout=60) as asker, \
                socket.create_connection(("127.0.0.1", port), timeout=60) as granter, \
                socket.create_connection(("127.0.0.1", port), timeout=60) as finder, \
                socket.create_connection(("127.0.0.1", port), timeout=60) as scram, \
                socket.create_connection(("127.0.0.1", port), timeout=60) as other:
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                creator.sendall(codec.encode_request(ApiKey.CREATE_TOPICS, 5, 1, "t", body))
                asker.sendall(auto)
                granter.sendall(acl)
                finder.sendall(codec.encode_request(ApiKey.FIND_COORDINATOR, 3, 1, "t",
                                                    {"key": "g", "key_type": 0}))
                scram.sendall(codec.encode_request(
                    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 1, "t", {"deletions": [],
                        "upsertions": [{"name": "carol", "mechanism": 1, "iterations": 4096,
                                        "salt": b"s" * 16, "salted_password": b"p" * 32}]}))
                # Two rounds: by the second the broker has started the CreateTopics (its
                # bytes came first), which must not hold this connection's answers up.
                for _ in range(2):
                    other.sendall(versions)
                    assert codec.decode_response(ApiKey.API_VERSIONS, 0,
                                                 answer(other))["error_code"] == 0
                for waiting in (creator, asker, granter, finder, scram):  # no answer yet
                    waiting.setblocking(False)
                    with pytest.raises(BlockingIOError):
                        waiting.recv(1, socket.MSG_PEEK)
                    waiting.setblocking(True)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            resp = codec.decode_response(ApiKey.CREATE_TOPICS, 5, answer(creator))
            asked = codec.decode_response(ApiKey.METADATA, 9, answer(asker))
            granted = codec.decode_response(ApiKey.CREATE_ACLS, 3, answer(granter))
            found = codec.decode_response(ApiKey.FIND_COORDINATOR, 3, answer(finder))
            stored = codec.decode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                                           answer(scram))
        assert resp["topics"][0]["error_code"] == ErrorCode.NONE, resp
        assert asked["topics"][0]["error_code"] in (ErrorCode.NONE,
                                                    ErrorCode.LEADER_NOT_AVAILABLE), asked
        cluster.wait_for_leaders("while-frozen", 1)
        cluster.wait_for_leaders("auto-made", 1)
        assert [r["error_code"] for r in granted["results"]] == [0], granted
        assert found["error_code"] in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        assert [r["error_code"] for r in stored["results"]] == [0], stored
        cluster.wait_for_leaders("__consumer_offsets", 3)  # made by the FindCoordinator
    finally:
        server.stop()
