"""Broker discovery through ZooKeeper (seed 000/002: clients find brokers in the registry):
the bootstrap list is /brokers/ids, read once (discover_bootstrap, for the ZooKeeper
consumer) or kept current by a watch (ZookeeperBrokerDiscovery, for `kafkactl produce
--zookeeper`). `--broker-list`/`-b` is the static alternative."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from kafkactl.client.errors import NoBrokersAvailable
from kafkactl.cluster import zk_paths
from kafkactl.cluster import zookeeper as zkconn
from kafkactl.cluster.broker_registry import live_brokers
from kafkactl.cluster.consumer_registry import connect_existing

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.client.kafka_client import KafkaClient

log = logging.getLogger("kafkactl.client")


def registered_servers(zk: KazooClient) -> list[tuple[str, int]]:
    """(host, port) of every live broker in /brokers/ids, by broker id."""
    return [(b.host, b.port) for _, b in sorted(live_brokers(zk).items())]


def bootstrap_string(servers: list[tuple[str, int]], connect: str) -> str:
    """`host:port,...` for a client's bootstrap list; NoBrokersAvailable if none."""
    if not servers:
        raise NoBrokersAvailable(f"no brokers are registered in ZooKeeper at {connect} "
                                 f"({zk_paths.BROKER_IDS} is empty)")
    return ",".join(f"{h}:{p}" for h, p in servers)


def discover_bootstrap(zk: KazooClient, connect: str) -> str:
    """The bootstrap list of the brokers registered now."""
    return bootstrap_string(registered_servers(zk), connect)


class ZookeeperBrokerDiscovery:
    def __init__(self, connect: str, *, timeout_s: float = 10.0,
                 session_timeout_s: float = 10.0) -> None:
        self.connect_string = connect
        # a chroot that does not exist or holds no Kafka cluster is a ChrootError (it was
        # kazoo's warning, then "no brokers are registered"), and nothing is created there
        self.zk = connect_existing(connect, require=zk_paths.BROKERS, timeout_s=timeout_s,
                                   session_timeout_s=session_timeout_s)
        self.servers: list[tuple[str, int]] = []
        self._clients: list[KafkaClient] = []
        self._lock = threading.Lock()
        self._closed = False
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk.ensure_path(zk_paths.BROKER_IDS)
        ChildrenWatch(self.zk, zk_paths.BROKER_IDS, self._changed)

    def _changed(self, _children: Any) -> bool:
        if self._closed:
            return False
        servers = registered_servers(self.zk)
        with self._lock:
            if servers != self.servers:
                log.info("brokers in ZooKeeper at %s: %s", self.connect_string,
                         ", ".join(f"{h}:{p}" for h, p in servers) or "none")
            self.servers = servers
            if servers:
                for client in self._clients:
                    client.bootstrap_servers = list(servers)
        return True

    def bootstrap(self) -> str:
        with self._lock:
            servers = list(self.servers)
        return bootstrap_string(servers, self.connect_string)

    def attach(self, client: KafkaClient) -> None:
        """Keep `client`'s bootstrap list equal to the registry from now on."""
        with self._lock:
            self._clients.append(client)
            if self.servers:
                client.bootstrap_servers = list(self.servers)

    def close(self) -> None:
        self._closed = True
        zkconn.close(self.zk)
