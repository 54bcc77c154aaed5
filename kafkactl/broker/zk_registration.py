"""The broker's side of ZooKeeper when `zookeeper.connect` is set: the cluster id (checked
against meta.properties), the broker's registration and its topics, kept in step every
second off the event loop (topic changes, and re-registration after a session expiry)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths, zookeeper
from kafkactl.cluster.broker_registry import BrokerRegistry, get_or_create_cluster_id

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.broker.config import BrokerConfig

log = logging.getLogger("kafkactl.broker")

SYNC_INTERVAL_S = 1.0


class ZkRegistrationError(Exception):
    """The broker cannot join ZooKeeper (the message says why)."""


def meta_cluster_ids(log_dirs: list[Path]) -> dict[str, str]:
    """cluster.id in each log dir's meta.properties (dirs without one are left out)."""
    from kafkactl.broker.server import read_meta_properties

    out = {}
    for d in log_dirs:
        cid = read_meta_properties(d / "meta.properties").get("cluster.id")
        if cid:
            out[str(d)] = cid
    return out


def standalone_data_dir(log_dirs: list[Path]) -> bool:
    """A standalone broker's data dir (its topic-metadata.json, not adopted by a cluster
    yet): it may bring its cluster id to an empty ZooKeeper. A cluster member's data dir
    never has one."""
    from kafkactl.broker.standalone_topic_admin import METADATA_FILE

    return bool(log_dirs) and (log_dirs[0] / METADATA_FILE).exists()


class ZkRegistration:
    def __init__(self, config: BrokerConfig) -> None:
        self.connect_string = config.get("zookeeper.connect")
        self.connection_timeout_s = config.get_int("zookeeper.connection.timeout.ms") / 1000
        self.session_timeout_s = config.get_int("zookeeper.session.timeout.ms") / 1000
        self.broker_id = config.broker_id
        self.zk: KazooClient | None = None
        self.registry: BrokerRegistry | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.broker_epoch = -1  # czxid of our registration, refreshed after re-registering

    def connect_and_check(self, log_dirs: list[Path]) -> str:
        """Connect; return the cluster id from /cluster/id (created by the first broker,
        reusing the id of a standalone broker's data dir joining). A log dir of another
        cluster is an error, also when ZooKeeper holds no cluster yet (Kafka's
        InconsistentClusterIdException: a wrong zookeeper.connect or chroot); nothing is
        created in ZooKeeper then, not even the chroot."""
        try:
            self.zk = zookeeper.connect(self.connect_string,
                                        timeout_s=self.connection_timeout_s,
                                        session_timeout_s=self.session_timeout_s,
                                        create_chroot=False)
        except (zookeeper.ZooKeeperUnavailable, ValueError) as e:
            raise ZkRegistrationError(str(e)) from None
        try:
            return self._check_cluster_id(log_dirs)
        except BaseException:
            self.close()
            raise

    def _check_cluster_id(self, log_dirs: list[Path]) -> str:
        assert self.zk is not None
        local = meta_cluster_ids(log_dirs)
        proposed = next(iter(sorted(set(local.values()))), None)
        if proposed is not None and self.zk.exists(zk_paths.CLUSTER_ID) is None \
                and not standalone_data_dir(log_dirs):
            d = next(d for d, c in sorted(local.items()) if c == proposed)
            raise ZkRegistrationError(
                f"log dir {d} belongs to cluster {proposed} (its meta.properties), but "
                f"ZooKeeper at {self.connect_string} holds no cluster: the broker is trying "
                "to join the wrong cluster; check zookeeper.connect and its chroot, or give "
                "the broker an empty data dir")
        if self.zk.exists("/") is None:  # the chroot: made only now
            try:
                zookeeper.ensure_chroot(self.connect_string,
                                        timeout_s=self.connection_timeout_s,
                                        session_timeout_s=self.session_timeout_s)
            except zookeeper.ZooKeeperUnavailable as e:
                raise ZkRegistrationError(str(e)) from None
        try:
            cid = get_or_create_cluster_id(self.zk, proposed)
        except RuntimeError as e:  # /cluster/id holds no valid id
            raise ZkRegistrationError(str(e)) from None
        for d, other in local.items():
            if other != cid:
                raise ZkRegistrationError(
                    f"log dir {d} belongs to cluster {other}, but ZooKeeper at "
                    f"{self.connect_string} holds cluster {cid}; point this broker at its own "
                    "cluster's zookeeper.connect or give it an empty data dir")
        return cid

    def register(self, endpoints: list[tuple[str, str, int]],
                 protocols: dict[str, str]) -> None:
        """/brokers/ids/[id] with every advertised listener (`endpoints`: name, host, port)
        and its security protocol; the top-level host/port are the first PLAINTEXT
        listener's (null and -1 without one), as Kafka registers them."""
        from kafkactl.cluster.broker_registry import DuplicateBrokerIdError

        assert self.zk is not None
        host, port = next(((h, p) for n, h, p in endpoints
                           if protocols.get(n) == "PLAINTEXT"), (None, -1))
        self.registry = BrokerRegistry(self.zk, self.broker_id, host, port, endpoints,
                                       session_timeout_s=self.session_timeout_s,
                                       protocols=protocols)
        try:
            self.registry.register()
        except DuplicateBrokerIdError as e:
            self.close()
            raise ZkRegistrationError(str(e)) from None
        except Exception as e:  # ZooKeeper went away while we registered
            self.close()
            raise ZkRegistrationError(
                f"could not register in ZooKeeper at {self.connect_string}: "
                f"{type(e).__name__} {e}".rstrip()) from None
        try:
            self.broker_epoch = self.registry.epoch()
        except Exception as e:  # the session went away right after registering (a stalled
            # process): the sync loop registers again and reads the epoch once it is back
            log.warning("ZooKeeper session lost right after registering (%s); registering "
                        "again when it is back", type(e).__name__)

    def start_sync(self, topics: Any = None) -> None:
        """Every second: re-register after a session expiry and, when `topics` is given (a
        broker publishing its own topics), publish `topics()` (name -> partition count)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self.zk is not None:
            self.zk.add_listener(self._on_session_state)
        self._task = self._loop.create_task(self._sync_loop(topics))

    def _on_session_state(self, state: str) -> None:
        """(kazoo's connection thread) A new connection: re-register at once rather than
        at the next tick (the controller election waits for this broker's registration)."""
        from kazoo.protocol.states import KazooState

        loop, wake = self._loop, self._wake
        if state == KazooState.CONNECTED and loop is not None and wake is not None \
                and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def _sync_loop(self, topics: Any) -> None:
        assert self._wake is not None
        while True:
            self._wake.clear()
            try:
                current = dict(topics()) if topics is not None else None
                await asyncio.to_thread(self._sync_once, current)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # ZooKeeper away for a while: keep serving, retry
                log.warning("ZooKeeper sync failed (%s: %s); will retry", type(e).__name__, e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SYNC_INTERVAL_S)

    def _sync_once(self, topics: dict[str, int] | None) -> None:
        from kazoo.protocol.states import KazooState

        if self.registry is None or self.zk is None or self.zk.state != KazooState.CONNECTED:
            return
        if self.registry.ensure_registered() or self.broker_epoch < 0:
            self.broker_epoch = self.registry.epoch()
        if topics is not None:
            self.registry.sync_topics(topics)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.zk is not None:
            zk, self.zk = self.zk, None
            zk.remove_listener(self._on_session_state)
            try:
                if self.registry is not None:
                    self.registry.deregister()
            except Exception as e:
                log.warning("could not deregister from ZooKeeper: %s: %s", type(e).__name__, e)
            zookeeper.close(zk)
