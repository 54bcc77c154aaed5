"""Helpers for the multi-broker tests: a three-broker cluster on one ZooKeeper (each test
under its own chroot), and raw requests to one chosen broker (a client library would pick
the broker itself)."""

from __future__ import annotations

import socket
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess
from tests.polling import wait_until

SESSION_TIMEOUT_MS = 3000


def request(port: int, api_key: ApiKey, version: int, body: dict[str, Any],
            timeout: float = 10.0) -> dict[str, Any]:
    """One request to the broker on `port`, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(codec.encode_request(api_key, version, 7, "cluster-test", body))
        head = _read(s, 4)
        (size,) = struct.unpack(">i", head)
        return codec.decode_response(api_key, version, _read(s, size))


def _read(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError("connection closed")
        out += chunk
    return bytes(out)


def metadata(port: int, topics: list[str] | None = None) -> dict[str, Any]:
    return request(port, ApiKey.METADATA, 9, {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})


def leaders(port: int, topic: str) -> dict[int, int]:
    """partition -> leader id, as the broker on `port` reports it ({} if unknown)."""
    md = metadata(port, [topic])
    for t in md["topics"]:
        if t["name"] == topic and t["error_code"] == 0:
            return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
    return {}


@dataclass
class Cluster:
    zookeeper_connect: str
    chroot: str
    brokers: dict[int, BrokerProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def controller(self) -> int:
        ids = set()
        for b in self.live():
            ids.add(metadata(b.port, [])["controller_id"])
        return ids.pop() if len(ids) == 1 else -1

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None]

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 30.0,
                         expect: Any = None) -> dict[int, int]:
        """Every live broker reports `partitions` partitions of `topic`, all with a leader
        (or, with `expect`, satisfying expect(leaders))."""
        def agreed() -> dict[int, int] | None:
            views = [leaders(b.port, topic) for b in self.live()]
            first = views[0]
            if len(first) != partitions or any(v != first for v in views):
                return None
            ok = expect(first) if expect is not None else all(lead >= 0 for lead in
                                                              first.values())
            return first if ok else None
        return wait_until(agreed, timeout, f"leaders of {topic} on every broker")


def start_cluster(broker_factory: Any, zookeeper: ZooKeeperServer, ids: tuple[int, ...] = (1, 2, 3),
                  **overrides: str) -> Cluster:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    brokers = {}
    for i in ids:
        settings = {"zookeeper_connect": connect, "broker_id": str(i),
                    "zookeeper_session_timeout_ms": str(SESSION_TIMEOUT_MS)}
        settings.update(overrides)
        brokers[i] = broker_factory(**settings)
    cluster = Cluster(connect, chroot, brokers)
    wait_until(lambda: cluster.controller() in brokers and
               all(len(metadata(b.port, [])["brokers"]) == len(ids) for b in cluster.live()),
               30, "a controller and every broker in every broker's metadata")
    return cluster
