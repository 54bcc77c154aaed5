"""A broker with zookeeper.connect registers itself and its topics (seed 002's layout)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests import zygote
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


def chroot(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect}/t-{uuid.uuid4().hex[:8]}"


def wait_for(fn, timeout: float = 20.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    return wait_until(fn, timeout, what)


def get_json(zk, path: str):  # type: ignore[no-untyped-def]
    data, _ = zk.get(path)
    return json.loads(data)


def test_broker_registers_itself_cluster_id_and_topics(broker_factory, zookeeper, zk) -> None:
    connect = chroot(zookeeper)
    root = connect.split("/", 1)[1]
    b = broker_factory(zookeeper_connect=connect, num_partitions="3")
    wait_for(lambda: zk.exists(f"/{root}/brokers/ids/0"), what="registration")
    reg = get_json(zk, f"/{root}/brokers/ids/0")
    assert reg["host"] == "127.0.0.1" and reg["port"] == b.port and reg["version"] == 4
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}"]
    assert reg["jmx_port"] == -1 and int(reg["timestamp"]) > 0
    assert zk.exists(f"/{root}/brokers/ids/0").ephemeralOwner != 0
    cid = get_json(zk, f"/{root}/cluster/id")["id"]
    assert len(cid) == 22
    meta = (b.data_dir / "meta.properties").read_text()
    assert f"cluster.id={cid}" in meta

    r = subprocess.run(["kcat", "-P", "-b", b.bootstrap, "-t", "orders"], input=b"a\nb\n",
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: zk.exists(f"/{root}/brokers/topics/orders/partitions/2/state"),
             what="topic znodes")
    value = get_json(zk, f"/{root}/brokers/topics/orders")
    assert value["partitions"] == {"0": [0], "1": [0], "2": [0]}
    state = get_json(zk, f"/{root}/brokers/topics/orders/partitions/1/state")
    assert state["leader"] == 0 and state["isr"] == [0] and state["leader_epoch"] == 0

    b.stop()  # a clean stop leaves the registry at once
    assert zk.exists(f"/{root}/brokers/ids/0") is None
    assert zk.exists(f"/{root}/brokers/topics/orders") is not None  # topics persist


def test_deleted_topic_leaves_the_registry(broker_factory, zookeeper, zk) -> None:
    connect = chroot(zookeeper)
    root = connect.split("/", 1)[1]
    b = broker_factory(zookeeper_connect=connect)
    from kafkactl.client.admin import AdminClient

    admin = AdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert admin.create_topics({"gone": (2, 1, {})}) == {"gone": None}
        wait_for(lambda: zk.exists(f"/{root}/brokers/topics/gone"), what="topic znode")
        admin.delete_topics(["gone"])
        wait_for(lambda: zk.exists(f"/{root}/brokers/topics/gone") is None,
                 what="topic znode removed")
    finally:
        admin.close()


def serve(data: Path, *overrides: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A `kafkactl serve` expected to refuse to start: its exit and output."""
    args = ["serve", "--data-dir", str(data),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"]
    for o in overrides:
        args += ["--override", o]
    return zygote.run(args, timeout=timeout, text=True)


def test_second_broker_with_the_same_id_is_refused(broker_factory, zookeeper, zk,
                                                   tmp_path: Path) -> None:
    connect = chroot(zookeeper)
    root = connect.split("/", 1)[1]
    b = broker_factory(zookeeper_connect=connect, zookeeper_session_timeout_ms="2000")
    wait_for(lambda: zk.exists(f"/{root}/brokers/ids/0"), what="registration")
    r = serve(tmp_path / "second", f"zookeeper.connect={connect}",
              "zookeeper.session.timeout.ms=2000")
    assert r.returncode != 0
    assert "broker.id 0 is already registered in ZooKeeper" in r.stderr, r.stderr
    assert f"127.0.0.1:{b.port}" in r.stderr and "Traceback" not in r.stderr
    assert "stopped less than its zookeeper.session.timeout.ms ago" in r.stderr, r.stderr
    # its start was refused: nothing to move, and ZooKeeper was never unreachable
    assert "not reachable" not in r.stderr, r.stderr


def test_log_dir_of_another_cluster_is_refused(broker_factory, zookeeper, zk) -> None:
    b = broker_factory(zookeeper_connect=chroot(zookeeper))
    b.stop()
    other = chroot(zookeeper)  # a ZooKeeper that already holds another cluster's id
    zk.create(f"/{other.split('/', 1)[1]}/cluster/id",
              b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}', makepath=True)
    r = serve(b.data_dir, f"zookeeper.connect={other}")
    assert r.returncode != 0
    assert "belongs to cluster" in r.stderr and "AAAAAAAAAAAAAAAAAAAAAA" in r.stderr, r.stderr


def test_unreachable_zookeeper_is_one_clear_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    r = zygote.run(
        ["serve", "--data-dir", str(tmp_path / "d"),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", f"zookeeper.connect=127.0.0.1:{port}/kafka",
         "--override", "zookeeper.connection.timeout.ms=1500"], timeout=60)
    assert r.returncode != 0
    err = r.stderr.decode()
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}/kafka" in err, err
    assert "Traceback" not in err


def test_session_expiry_re_registers(broker_factory, zookeeper, zk) -> None:
    """SIGSTOP the broker past its session timeout: the ephemeral node goes; on SIGCONT
    the broker registers again without a restart."""
    import signal

    connect = chroot(zookeeper)
    root = connect.split("/", 1)[1]
    b = broker_factory(zookeeper_connect=connect, zookeeper_session_timeout_ms="2000")
    assert b.proc is not None
    path = f"/{root}/brokers/ids/0"
    first = wait_for(lambda: zk.exists(path), what="registration").ephemeralOwner
    # stopped once start-up is over: a broker frozen past its session in the middle of
    # start-up (registered, not yet done) exits with "could not register", a different case
    wait_for(lambda: "started: cluster" in b.log(), what="the end of start-up")
    b.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: zk.exists(path) is None, timeout=30, what="session expiry")
    finally:
        b.proc.send_signal(signal.SIGCONT)
    try:
        stat = wait_for(lambda: zk.exists(path), timeout=30, what="re-registration")
    except AssertionError as e:  # what the broker did meanwhile, for the failure report
        raise AssertionError(f"{e}; the broker's log:\n{b.log()}") from None
    assert stat.ephemeralOwner != first


def test_malformed_znodes_are_skipped(zookeeper, zk) -> None:
    from kafkactl.cluster import broker_registry
    from kafkactl.cluster import zookeeper as zkmod

    root = f"/t-{uuid.uuid4().hex[:8]}"
    zk.create(f"{root}/brokers/ids/1", b"{not json", makepath=True)
    zk.create(f"{root}/brokers/ids/2", json.dumps(
        {"host": "h", "port": 9092, "version": 4}).encode(), makepath=True)
    zk.create(f"{root}/brokers/topics/bad", b"\xff\xfe", makepath=True)
    zk.create(f"{root}/brokers/topics/good", b'{"version":2,"partitions":{"0":[2]}}',
              makepath=True)
    client = zkmod.connect(zookeeper.connect + root, timeout_s=10)
    try:
        assert list(broker_registry.live_brokers(client)) == [2]
        assert broker_registry.registered_topics(client) == {"good": {0: [2]}}
    finally:
        zkmod.close(client)


def test_discovery_follows_the_registry(broker_factory, zookeeper, zk) -> None:
    """A producer bootstrapped from ZooKeeper follows a broker that moved to a new port."""
    from kafkactl.client.producer import Producer
    from kafkactl.client.zookeeper_discovery import ZookeeperBrokerDiscovery

    connect = chroot(zookeeper)
    root = connect.split("/", 1)[1]
    first = broker_factory(zookeeper_connect=connect)
    wait_for(lambda: zk.exists(f"/{root}/brokers/ids/0"), what="registration")
    disco = ZookeeperBrokerDiscovery(connect)
    try:
        assert disco.bootstrap() == first.bootstrap
        p = Producer(bootstrap_servers=disco.bootstrap(), linger_ms=0)
        disco.attach(p.client)
        assert p.send("moved", b"one", partition=0).result(30).offset == 0
        first.stop()
        moved = BrokerProcess(first.data_dir, free_port(), dict(first.overrides))
        moved.start()
        try:
            wait_for(lambda: disco.servers == [("127.0.0.1", moved.port)], what="new address")
            assert p.client.bootstrap_servers == [("127.0.0.1", moved.port)]
            assert p.send("moved", b"two", partition=0).result(60).offset == 1
        finally:
            p.close()
            moved.kill()
    finally:
        disco.close()


def test_zookeeper_restart_and_a_stop_while_it_is_away(broker_factory, tmp_path: Path) -> None:
    """ZooKeeper restarted under a running broker: the broker is registered again after;
    ZooKeeper gone for good: SIGTERM still stops the broker promptly (no ZooKeeper call
    blocks its shutdown)."""
    from kafkactl.cluster import zookeeper as zkmod
    from tests.cluster.zk import ZooKeeperServer, available

    if available() is not None:
        pytest.skip(str(available()))
    server = ZooKeeperServer(tmp_path / "own-zk")
    server.start()
    try:
        b = broker_factory(zookeeper_connect=server.connect,
                           zookeeper_session_timeout_ms="3000")
        client = zkmod.connect(server.connect, timeout_s=10)
        wait_for(lambda: client.exists("/brokers/ids/0"), what="registration")
        zkmod.close(client)
        server.stop()
        time.sleep(4)  # past the session timeout: the session (and its node) expires
        server.start()
        client = zkmod.connect(server.connect, timeout_s=10)
        try:
            wait_for(lambda: client.exists("/brokers/ids/0"), timeout=40,
                     what="registration after the restart")
        finally:
            zkmod.close(client)
        server.stop()
        start = time.monotonic()
        assert b.stop(timeout=40) == 0
        assert time.monotonic() - start < 40
    finally:
        server.stop()


def test_session_lost_right_after_registering_is_not_fatal(zookeeper, tmp_path: Path,
                                                           monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A broker frozen past its session just after it registered (the broker epoch not
    read yet) keeps starting; the sync loop reads the epoch once ZooKeeper answers."""
    from kazoo.exceptions import ConnectionLoss

    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.zk_registration import ZkRegistration
    from kafkactl.cluster.broker_registry import BrokerRegistry

    cfg = BrokerConfig.build(overrides=[f"zookeeper.connect={chroot(zookeeper)}",
                                        "zookeeper.session.timeout.ms=6000"])
    reg = ZkRegistration(cfg)
    reg.connect_and_check([tmp_path])
    real_epoch = BrokerRegistry.epoch

    def lost(self: BrokerRegistry) -> int:
        raise ConnectionLoss()

    monkeypatch.setattr(BrokerRegistry, "epoch", lost)
    try:
        reg.register([("PLAINTEXT", "127.0.0.1", 9092)], {"PLAINTEXT": "PLAINTEXT"})
        assert reg.broker_epoch == -1
        monkeypatch.setattr(BrokerRegistry, "epoch", real_epoch)
        reg._sync_once(None)
        assert reg.zk is not None and reg.registry is not None
        stat = reg.zk.exists(reg.registry.path)
        assert stat is not None and reg.broker_epoch == stat.czxid
    finally:
        reg.close()
