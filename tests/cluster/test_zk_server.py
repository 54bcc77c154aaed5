"""The tests' own ZooKeeper server helper (tests/cluster/zk.py): `start()` returns only once
the server serves sessions, on a first start and on a restart over its existing data."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.cluster import zookeeper as zkmod
from tests.cluster.zk import ZooKeeperServer, available


def test_start_returns_once_the_server_serves_sessions(tmp_path: Path) -> None:
    if available() is not None:
        pytest.skip(str(available()))
    server = ZooKeeperServer(tmp_path / "zk")
    try:
        for _ in range(2):  # a first start, then a restart that loads the data written
            server.start()
            assert server._serving()  # checked once, right away: no waiting here
            client = zkmod.connect(server.connect, timeout_s=10)
            try:
                client.ensure_path("/written")
                assert client.exists("/written")
            finally:
                zkmod.close(client)
            server.stop()
    finally:
        server.stop()
