"""Brokers and topics in ZooKeeper (seed 002: "Broker node registration").

A broker with `zookeeper.connect` set reads (or creates) `/cluster/id`, registers itself as
the ephemeral `/brokers/ids/[id]`, and publishes the topics and partitions it holds under
`/brokers/topics/[topic]`, so the seed's ZooKeeper consumers and producers discover brokers
and topics there. Until the cluster controller exists this broker leads every partition it
holds (leader = itself, ISR = [itself]). Readers (`live_brokers`, `registered_topics`) skip a
znode holding malformed JSON with a warning.

Everything here is blocking kazoo calls: the broker runs them off its event loop.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json, get_all, read_json

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

BROKER_REGISTRATION_VERSION = 4
CALL_TIMEOUT_S = 5.0  # one ZooKeeper call from the broker, at most
TOPIC_ZNODE_VERSION = 2


class DuplicateBrokerIdError(Exception):
    """Another live broker holds this broker id in ZooKeeper."""


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...] = ()  # "LISTENER://host:port", as registered
    epoch: int = -1  # the czxid of its registration: a new value means it restarted
    # listener name -> security protocol (listener_security_protocol_map)
    protocols: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def listeners(self) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port), from the registered endpoints."""
        out: dict[str, tuple[str, int]] = {}
        for e in self.endpoints:
            name, sep, rest = e.partition("://")
            host, _, port = rest.rpartition(":")
            if sep and port.isdigit():
                out[name.upper()] = (host.strip("[]"), int(port))
        return out

    def endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) of `listener`; the registration's host/port when it has none."""
        return self.listeners().get(listener.upper(), (self.host, self.port))

    def protocol(self, listener: str) -> str:
        return self.protocols.get(listener.upper(), listener.upper())


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 (a random UUID), as Kafka generates them."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_cluster_id(zk: KazooClient) -> str | None:
    """The cluster id in /cluster/id; None when there is none (or it is not readable)."""
    found = read_json(zk, zk_paths.CLUSTER_ID)
    if isinstance(found, dict) and isinstance(found.get("id"), str) and found["id"]:
        return str(found["id"])
    return None


def get_or_create_cluster_id(zk: KazooClient, proposed: str | None = None) -> str:
    """The cluster id in /cluster/id; the first broker creates it (with `proposed`, e.g. the
    id already in its meta.properties, or a new one)."""
    from kazoo.exceptions import NodeExistsError

    found_id = read_cluster_id(zk)
    if found_id is not None:
        return found_id
    cid = proposed or new_cluster_id()
    try:
        zk.create(zk_paths.CLUSTER_ID, encode_json({"version": "1", "id": cid}),
                  makepath=True)
        return cid
    except NodeExistsError:  # another broker won the race, or the node holds garbage
        found = read_json(zk, zk_paths.CLUSTER_ID)
        if isinstance(found, dict) and isinstance(found.get("id"), str) and found["id"]:
            return str(found["id"])
        raise RuntimeError(f"znode {zk_paths.CLUSTER_ID} holds no valid cluster id; "
                           "fix or delete it") from None


def registration(broker_id: int, host: str | None, port: int,
                 endpoints: list[tuple[str, str, int]],
                 protocols: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON of /brokers/ids/[id] (Kafka's version 4 layout): every advertised listener
    in `endpoints`, its security protocol in `listener_security_protocol_map`; `host` and
    `port` are the first PLAINTEXT listener's (null and -1 without one), for old clients."""
    protocols = protocols or {}
    return {
        "listener_security_protocol_map": {name: protocols.get(name, "PLAINTEXT")
                                           for name, _, _ in endpoints},
        "endpoints": [f"{name}://{h}:{p}" for name, h, p in endpoints],
        "jmx_port": -1, "host": host, "port": port,
        "timestamp": str(int(time.time() * 1000)), "version": BROKER_REGISTRATION_VERSION,
    }


def parse_broker(broker_id: int, value: Any) -> BrokerInfo | None:
    if not isinstance(value, dict):
        return None
    host, port = value.get("host"), value.get("port")
    endpoints = tuple(str(e) for e in value.get("endpoints") or () if isinstance(e, str))
    if (not isinstance(host, str) or not isinstance(port, int) or port <= 0) and endpoints:
        # Kafka leaves host/port null for non-PLAINTEXT listeners: take the first endpoint.
        rest = endpoints[0].split("://", 1)[-1]
        host, _, p = rest.rpartition(":")
        port = int(p) if p.isdigit() else -1
    if not isinstance(host, str) or not isinstance(port, int) or port <= 0:
        return None
    pmap = value.get("listener_security_protocol_map")
    protocols = {str(k).upper(): str(v).upper() for k, v in pmap.items()} \
        if isinstance(pmap, dict) else {}
    return BrokerInfo(broker_id, host, port, endpoints, protocols=protocols)


def live_brokers(zk: KazooClient) -> dict[int, BrokerInfo]:
    """Registered brokers by id (a znode that is not a broker registration is skipped).
    The registrations are read pipelined: two round trips, whatever the cluster's size."""
    from kazoo.exceptions import NoNodeError

    try:
        children = zk.get_children(zk_paths.BROKER_IDS)
    except NoNodeError:
        return {}
    return read_registrations(zk, [int(c) for c in children if c.isdigit()])


def read_registrations(zk: KazooClient, ids: list[int]) -> dict[int, BrokerInfo]:
    """The registrations of `ids` that exist and parse, all requests in flight at once."""
    paths = {b: zk_paths.broker(b) for b in ids}
    out: dict[int, BrokerInfo] = {}
    for broker_id, got in get_all(zk, paths).items():
        if got is None:
            continue
        info = parse_broker(broker_id, decode_json(got[0], paths[broker_id]))
        if info is None:
            log.warning("ignoring broker registration %s: no host/port", paths[broker_id])
            continue
        out[info.broker_id] = dataclasses.replace(info, epoch=got[1].czxid)
    return out


def parse_topic(value: Any) -> dict[int, list[int]] | None:
    parts = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(parts, dict):
        return None
    out: dict[int, list[int]] = {}
    for p, replicas in parts.items():
        if not str(p).isdigit() or not isinstance(replicas, list):
            return None
        out[int(p)] = [int(r) for r in replicas if isinstance(r, int)]
    return out


def topic_assignment(zk: KazooClient, topic: str) -> dict[int, list[int]] | None:
    """partition -> replicas of a registered topic (None: absent or malformed)."""
    path = zk_paths.topic(topic)
    value = read_json(zk, path)
    if value is None:
        return None
    parsed = parse_topic(value)
    if parsed is None:
        log.warning("ignoring topic registration %s: no partition map", path)
    return parsed


def registered_topics(zk: KazooClient) -> dict[str, dict[int, list[int]]]:
    from kazoo.exceptions import NoNodeError

    try:
        names = zk.get_children(zk_paths.BROKER_TOPICS)
    except NoNodeError:
        return {}
    out = {}
    for name in names:
        parts = topic_assignment(zk, name)
        if parts is not None:
            out[name] = parts
    return out


class BrokerRegistry:
    """One broker's registration: its ephemeral id node and the topics it holds."""

    def __init__(self, zk: KazooClient, broker_id: int, host: str | None, port: int,
                 endpoints: list[tuple[str, str, int]], *, session_timeout_s: float,
                 protocols: Mapping[str, str] | None = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.path = zk_paths.broker(broker_id)
        self.value = encode_json(registration(broker_id, host, port, endpoints, protocols))
        self.session_timeout_s = session_timeout_s
        self._published: dict[str, int] = {}  # topic -> partitions written by us

    # ---- the broker's own node ---------------------------------------------------------------
    def _owned_by_us(self, timeout: float = CALL_TIMEOUT_S) -> bool | None:
        """True/False: the node exists and is (not) this session's; None: no node."""
        stat = self.zk.exists_async(self.path).get(timeout=timeout)
        if stat is None:
            return None
        return bool(stat.ephemeralOwner == self.zk.client_id[0])

    def register(self) -> None:
        """Create /brokers/ids/[id]. A node left by a previous session of this broker (a
        kill -9) expires within the session timeout: wait for it that long, then refuse.
        Every call is bounded: a ZooKeeper that goes away meanwhile is an error, not a
        hang."""
        from kazoo.exceptions import NodeExistsError, ZookeeperError
        from kazoo.handlers.threading import KazooTimeoutError

        deadline = time.monotonic() + self.session_timeout_s + 2.0
        while True:
            remaining = max(0.5, deadline - time.monotonic())
            try:
                self.zk.create_async(self.path, self.value, ephemeral=True,
                                     makepath=True).get(timeout=remaining)
                log.info("registered broker %d in ZooKeeper at %s", self.broker_id, self.path)
                return
            except NodeExistsError:
                if self._owned_by_us(remaining):
                    return
                if time.monotonic() >= deadline:
                    other = read_json(self.zk, self.path)
                    where = (f"{other.get('host')}:{other.get('port')}"
                             if isinstance(other, dict) else "unknown address")
                    raise DuplicateBrokerIdError(
                        f"broker.id {self.broker_id} is already registered in ZooKeeper "
                        f"({self.path}, {where}) by another session: a broker running with "
                        "this id, or one that stopped less than its zookeeper.session."
                        "timeout.ms ago (then its registration expires: start again after "
                        "that); else give this broker another broker.id") from None
                time.sleep(0.25)
            except (KazooTimeoutError, ZookeeperError) as e:
                if time.monotonic() >= deadline:
                    raise DuplicateBrokerIdError(
                        f"could not register broker.id {self.broker_id} in ZooKeeper "
                        f"({self.path}): {type(e).__name__} {e}".rstrip()) from None
                time.sleep(0.25)

    def epoch(self) -> int:
        """The czxid of this broker's registration (its broker epoch); -1 if absent."""
        stat = self.zk.exists_async(self.path).get(timeout=CALL_TIMEOUT_S)
        return -1 if stat is None else int(stat.czxid)

    def ensure_registered(self) -> bool:
        """Re-create the id node after a session expiry; True when it had to."""
        from kazoo.exceptions import NodeExistsError

        if self._owned_by_us() is not None:
            return False
        try:
            self.zk.create(self.path, self.value, ephemeral=True, makepath=True)
        except NodeExistsError:
            return False
        log.warning("ZooKeeper session was lost: broker %d registered again", self.broker_id)
        self._published.clear()  # re-check every topic too
        return True

    # ---- topics ------------------------------------------------------------------------------
    def sync_topics(self, topics: Mapping[str, int]) -> None:
        """Publish `topics` (name -> partition count) and withdraw topics this broker
        published that are gone. A topic registered by other brokers is left alone."""
        for name, count in topics.items():
            if self._published.get(name) != count:
                self._publish(name, count)
        for name in [t for t in self._published if t not in topics]:
            self._withdraw(name)

    def _publish(self, name: str, count: int) -> None:
        from kazoo.exceptions import NodeExistsError

        path = zk_paths.topic(name)
        current = topic_assignment(self.zk, name)
        others = {r for reps in (current or {}).values() for r in reps} - {self.broker_id}
        if others:
            log.warning("topic %s is registered in ZooKeeper with brokers %s; not "
                        "overwriting it", name, sorted(others))
            self._published[name] = count
            return
        value = encode_json({"version": TOPIC_ZNODE_VERSION, "partitions": {
            str(p): [self.broker_id] for p in range(count)},
            "adding_replicas": {}, "removing_replicas": {}})
        try:
            self.zk.create(path, value, makepath=True)
        except NodeExistsError:
            self.zk.set(path, value)
        state = encode_json({"controller_epoch": 1, "leader": self.broker_id, "version": 1,
                             "leader_epoch": 0, "isr": [self.broker_id]})
        for p in range(count):
            ppath = zk_paths.partition_state(name, p)
            try:
                self.zk.create(ppath, state, makepath=True)
            except NodeExistsError:
                self.zk.set(ppath, state)
        self._published[name] = count

    def _withdraw(self, name: str) -> None:
        from kazoo.exceptions import NoNodeError

        current = topic_assignment(self.zk, name)
        if current is not None and all(reps == [self.broker_id] for reps in current.values()):
            with contextlib.suppress(NoNodeError):
                self.zk.delete(zk_paths.topic(name), recursive=True)
        self._published.pop(name, None)

    def deregister(self) -> None:
        """Delete our node now (at most CALL_TIMEOUT_S: closing the session removes it
        anyway)."""
        if self._owned_by_us():
            self.zk.delete_async(self.path).get(timeout=CALL_TIMEOUT_S)
