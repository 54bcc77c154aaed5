"""The ZooKeeper consumer (`kafkactl consume --zookeeper`) reads its ZooKeeper offsets as
`kafkactl offsets migrate` does (consumer_registry.parse_offset): a stored offset that is
no Long.parseLong number (`1_000`, ` 7`, `+-5`, a digit past U+FFFF, empty, past 64 bits)
is an error naming the znode, as Kafka's consumer failed on it, never read leniently; a
missing znode, or a negative offset, is no offset (auto.offset.reset). A mistyped chroot
(missing, or without /brokers) is an error, and nothing is created. ZooKeeper only: no
broker is started (the bootstrap is an unreachable address, never contacted)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.client.zookeeper_consumer import MalformedOffsetError, ZookeeperConsumer
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.zk import ZooKeeperServer

NOWHERE = "127.0.0.1:1"
MALFORMED = ["1_000", " 7", "7\n", "", "9" * 20, "0x10", "+-5", "\U0001d7d3"]


@pytest.fixture
def chroot(zookeeper: ZooKeeperServer) -> Iterator[tuple[str, Any]]:
    """A chroot that looks like a Kafka cluster's (/brokers/ids, /brokers/topics)."""
    connect = f"{zookeeper.connect}/zcs-{uuid.uuid4().hex[:8]}"
    zk = zkmod.connect(connect, timeout_s=10)
    try:
        zk.ensure_path("/brokers/ids")
        zk.ensure_path("/brokers/topics")
        yield connect, zk
    finally:
        zkmod.close(zk)


def test_a_malformed_stored_offset_is_an_error_naming_the_znode(
        chroot: tuple[str, Any]) -> None:
    connect, zk = chroot
    zk.create("/consumers/g/offsets/t/1", b"7", makepath=True)
    zk.create("/consumers/g/offsets/t/2", b"-3", makepath=True)  # no position: reset
    consumer = ZookeeperConsumer("t", group_id="g", zookeeper=connect,
                                 bootstrap_servers=NOWHERE)
    try:  # no znode (partition 3) is no offset too
        tps = [("t", 1), ("t", 2), ("t", 3)]
        assert consumer.committed(tps) == {("t", 1): 7, ("t", 2): -1, ("t", 3): -1}
        zk.create("/consumers/g/offsets/t/0", b"", makepath=True)
        for value in MALFORMED:
            zk.set("/consumers/g/offsets/t/0", value.encode())
            with pytest.raises(MalformedOffsetError) as caught:
                consumer.committed([("t", 0), ("t", 1)])
            message = str(caught.value)
            assert "/consumers/g/offsets/t/0" in message and connect in message, message
            assert "\n" not in message, message
    finally:
        consumer.close()


def test_consume_says_which_znode_is_malformed(chroot: tuple[str, Any]) -> None:
    connect, zk = chroot
    # the topic as a broker registers it: the consumer owns t-0 and asks for its offset
    zk.create("/brokers/topics/t", b'{"version":1,"partitions":{"0":[0]}}')
    zk.create("/consumers/cg/offsets/t/0", b"1_000", makepath=True)
    r = zygote.run(["consume", "--zookeeper", connect, "-G", "cg", "-t", "t", "-b", NOWHERE,
                    "-q", "--timeout-ms", "3000"], text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: malformed offset in znode /consumers/cg/offsets/t/0 "), \
        r.stderr
    assert "not a number: '1_000'" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_mistyped_chroot_is_an_error(zookeeper: ZooKeeperServer) -> None:
    name = f"nochroot-{uuid.uuid4().hex[:8]}"
    r = zygote.run(["consume", "--zookeeper", f"{zookeeper.connect}/{name}", "-G", "g",
                    "-t", "t", "-b", NOWHERE, "-q", "--timeout-ms", "3000"],
                   text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"has no chroot /{name} (--zookeeper " in r.stderr, r.stderr
    assert "Warning" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    empty = f"/empty-{uuid.uuid4().hex[:8]}"
    zk = zkmod.connect(zookeeper.connect, timeout_s=10)
    try:
        assert zk.exists(f"/{name}") is None  # nothing was created
        zk.ensure_path(empty)
        r = zygote.run(["consume", "--zookeeper", zookeeper.connect + empty, "-G", "g",
                        "-t", "t", "-b", NOWHERE, "-q", "--timeout-ms", "3000"],
                       text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "has no /brokers: no Kafka broker ever registered there" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert zk.get_children(empty) == []  # no /consumers, no /brokers made there
    finally:
        zkmod.close(zk)


def test_produce_with_a_mistyped_chroot_is_an_error(zookeeper: ZooKeeperServer) -> None:
    """`produce --zookeeper` finds brokers in the chroot's /brokers/ids: a chroot that does
    not exist is one line saying so (it was kazoo's warning, then "no brokers are
    registered"), and nothing is created there."""
    name = f"nochroot-{uuid.uuid4().hex[:8]}"
    r = zygote.run(["produce", "--zookeeper", f"{zookeeper.connect}/{name}", "-t", "t", "-q"],
                   input=b"x\n", timeout=60)
    stderr = bytes(r.stderr).decode()
    assert r.returncode == 1, stderr
    assert f"has no chroot /{name} (--zookeeper " in stderr, stderr
    assert "Warning" not in stderr and stderr.count("\n") == 1, stderr
    zk = zkmod.connect(zookeeper.connect, timeout_s=10)
    try:
        assert zk.exists(f"/{name}") is None
    finally:
        zkmod.close(zk)
