"""Fixtures: `zookeeper` (one real server for the whole package: every test works under a
chroot of its own, so none sees another's znodes), `zk` (a kazoo client on it), `chrooted`
(a kazoo client rooted at a fresh chroot of its own) and `own_zookeeper` (a server of the
test's own, for tests that stop and start it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.zk import ZooKeeperServer, available


@pytest.fixture(scope="package")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk(zookeeper: ZooKeeperServer) -> Iterator[object]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def chrooted(zookeeper: ZooKeeperServer, zk: object) -> Iterator[object]:
    """A started kazoo client rooted at a new, empty chroot."""
    from kazoo.client import KazooClient

    chroot = f"/r-{uuid.uuid4().hex[:8]}"
    zk.ensure_path(chroot)  # type: ignore[attr-defined]
    client = KazooClient(hosts=f"{zookeeper.connect}{chroot}")
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path / "own-zk")
    server.start()
    yield server
    server.stop()
