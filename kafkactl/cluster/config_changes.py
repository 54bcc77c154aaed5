"""Dynamic config changes in a ZooKeeper cluster, as Kafka's ZooKeeper mode makes them
(AdminZkClient.changeConfigs, DynamicConfigManager, ZkNodeChangeNotificationListener).

A change is two writes, made here in one ZooKeeper transaction:

    /config/[type]/[name]                  {"version":1,"config":{...}}   the new config
    /config/changes/config_change_[seq]    {"version":2,"entity_path":"[type]/[name]"}

`type` is `topics` (a topic's overrides) or `brokers` (`[id]`, or `<default>` for the
cluster-wide layer of dynamic broker configs); `users` (SCRAM credentials) notifications
are the credential store's (cluster/scram_zk_store.py), `users`, `clients` and `ips`
(client quotas: users/[u], users/[u]/clients/[c], clients/[c]; and KIP-612's
connection_creation_rate: ips/[address] or ips/<default>) the quota store's
(broker/zk_client_quotas.py). Every broker runs a
ConfigChangeListener: it watches /config/changes, takes the notifications newer than the
last one it applied in sequence order, re-reads each entity's config znode and hands it to
the broker, and remembers the last sequence applied. Notifications older than
CHANGE_EXPIRATION_MS (Kafka's 15 minutes) are deleted by the listener that next processes
the directory, as Kafka purges them. A listener that cannot read ZooKeeper retries after
RETRY_S (and kazoo re-reads the directory after a reconnection), so no change is skipped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json, get_all, sequence_number

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

TOPICS, BROKERS, USERS, IPS = "topics", "brokers", "users", "ips"
CONFIG_ZNODE_VERSION = 1
CHANGE_VERSION = 2
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
RETRY_S = 1.0
MAX_WRITE_ATTEMPTS = 20


@dataclass(frozen=True)
class EntityConfig:
    """An entity's config as read from ZooKeeper: `config` None when its znode does not
    exist; `zxid` the znode's last modification (when absent, the last change of its
    parent's children), to order two reads."""

    entity_type: str
    name: str
    config: dict[str, str] | None
    zxid: int


def parse_config(value: Any) -> dict[str, str]:
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return {}
    return {str(k): str(v) for k, v in config.items() if v is not None}


def read_entity_config(zk: KazooClient, entity_type: str, name: str) -> EntityConfig:
    from kazoo.exceptions import NoNodeError

    path = zk_paths.entity_config(entity_type, name)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        # absent since the parent's last child change (a deletion's zxid, or later)
        parent = zk.exists(zk_paths.entity_configs(entity_type))
        return EntityConfig(entity_type, name, None, 0 if parent is None else parent.pzxid)
    return EntityConfig(entity_type, name, parse_config(decode_json(data, path)), stat.mzxid)


def read_entity_configs(zk: KazooClient, entity_type: str,
                        names: Collection[str]) -> dict[str, dict[str, str] | None]:
    """Several entities' configs (None: no znode), read pipelined in one round trip."""
    paths = {name: zk_paths.entity_config(entity_type, name) for name in names}
    return {name: None if got is None else parse_config(decode_json(got[0], paths[name]))
            for name, got in get_all(zk, paths).items()}


def write_entity_config(zk: KazooClient, entity_type: str, name: str,
                        config: Mapping[str, str]) -> int:
    """/config/[type]/[name] := `config`, and its change notification, in one transaction
    (so no broker can see the one without the other); the transaction's zxid (the config
    znode's new mzxid, 0 if unknown). Raises kazoo's errors."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    path = zk_paths.entity_config(entity_type, name)
    value = encode_json({"version": CONFIG_ZNODE_VERSION, "config": dict(config)})
    change = encode_json({"version": CHANGE_VERSION, "entity_path": f"{entity_type}/{name}"})
    zk.ensure_path(zk_paths.CONFIG_CHANGES)
    zk.ensure_path(zk_paths.entity_configs(entity_type))
    for _ in range(MAX_WRITE_ATTEMPTS):
        tx = zk.transaction()
        if zk.exists(path):
            tx.set_data(path, value)
        else:
            tx.create(path, value)
        tx.create(zk_paths.config_change(zk_paths.CONFIG_CHANGE_PREFIX), change,
                  sequence=True)
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if not failed:
            stat = zk.exists(str(results[-1]))  # the notification, made by the same zxid
            return int(stat.czxid) if stat is not None else 0
        if any(isinstance(r, (NodeExistsError, NoNodeError)) for r in failed):
            continue  # the config znode was made or deleted meanwhile: once more
        raise failed[0]
    raise RuntimeError(f"could not write znode {path}: it kept changing")


def update_entity_config(zk: KazooClient, entity_type: str, name: str,
                         update: Callable[[dict[str, str]], dict[str, str]]) -> bool:
    """Read-modify-write of /config/[type]/[name]: `update` gets the config read (a copy)
    and returns the one wanted, written conditionally on the version read with its change
    notification in one transaction; another writer in between (BadVersion, the znode made
    or deleted meanwhile) makes it read and update again, so keys `update` leaves alone
    (e.g. a user's SCRAM credentials next to its quotas) are never lost. Parents are made
    as needed. False when `update` changed nothing (nothing written). Raises kazoo's
    errors."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    path = zk_paths.entity_config(entity_type, name)
    change = encode_json({"version": CHANGE_VERSION, "entity_path": f"{entity_type}/{name}"})
    zk.ensure_path(zk_paths.CONFIG_CHANGES)
    zk.ensure_path(path.rsplit("/", 1)[0])
    for _ in range(MAX_WRITE_ATTEMPTS):
        try:
            data, stat = zk.get(path)
            version = stat.version
            current = parse_config(decode_json(data, path))
        except NoNodeError:
            version, current = -1, {}
        wanted = update(dict(current))
        if wanted == current and version >= 0:
            return False
        value = encode_json({"version": CONFIG_ZNODE_VERSION, "config": dict(wanted)})
        tx = zk.transaction()
        if version >= 0:
            tx.set_data(path, value, version=version)
        else:
            tx.create(path, value)
        tx.create(zk_paths.config_change(zk_paths.CONFIG_CHANGE_PREFIX), change,
                  sequence=True)
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if not failed:
            return True
        if any(isinstance(r, (BadVersionError, NodeExistsError, NoNodeError))
               for r in failed):
            continue  # written by another meanwhile: read it again
        raise failed[0]
    raise RuntimeError(f"could not update znode {path}: it kept changing")


def parse_change(data: bytes | None, path: str) -> tuple[str, str] | None:
    """(entity type, name) of a notification, None when it names none."""
    value = decode_json(data, path)
    entity = value.get("entity_path") if isinstance(value, dict) else None
    if not isinstance(entity, str):
        log.warning("ignoring config change %s: no entity_path", path)
        return None
    kind, _, name = entity.partition("/")
    if not kind or not name:
        log.warning("ignoring config change %s: entity_path %r is not type/name", path,
                    entity)
        return None
    return kind, name


class ConfigChangeListener:
    """Applies the /config/changes notifications of `entity_types` in order: for each,
    `on_change` gets the entity's config as now in ZooKeeper (on the listener's thread)."""

    def __init__(self, zk: KazooClient, on_change: Callable[[EntityConfig], None], *,
                 entity_types: Collection[str] = (TOPICS, BROKERS),
                 expiration_ms: int = CHANGE_EXPIRATION_MS,
                 clock: Callable[[], float] = time.time) -> None:
        self.zk = zk
        self.on_change = on_change
        self.entity_types = frozenset(entity_types)
        self.expiration_ms = expiration_ms
        self.clock = clock
        self.last_applied = -1  # the sequence number of the last notification applied
        self._ctimes: dict[str, int] = {}  # notifications seen -> their creation (ms)
        self._lock = threading.Lock()
        self._retry: threading.Timer | None = None
        self._stopped = False

    def start(self) -> None:
        """Blocking: watch /config/changes; the notifications already there are applied
        now (re-reading an entity's config twice is harmless)."""
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk.ensure_path(zk_paths.CONFIG_CHANGES)
        ChildrenWatch(self.zk, zk_paths.CONFIG_CHANGES, self._on_children)

    def stop(self) -> None:
        self._stopped = True
        retry = self._retry
        if retry is not None:
            retry.cancel()

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        self.process(children)
        return True

    def process(self, children: list[str] | None = None) -> None:
        """Apply the notifications newer than the last applied, then purge the expired."""
        with self._lock:
            try:
                if children is None:
                    children = self.zk.get_children(zk_paths.CONFIG_CHANGES)
                self._apply_new(children)
                self._purge(children)
            except Exception as e:  # ZooKeeper away, or a bug in a handler: not fatal
                log.warning("processing config changes failed (%s: %s); retrying in %g s",
                            type(e).__name__, e, RETRY_S)
                self._schedule_retry()

    def _schedule_retry(self) -> None:
        if self._stopped or (self._retry is not None and self._retry.is_alive()):
            return
        self._retry = threading.Timer(RETRY_S, self.process)
        self._retry.daemon = True
        self._retry.start()

    def _apply_new(self, children: list[str]) -> None:
        from kazoo.exceptions import NoNodeError

        ours = [c for c in children if c.startswith(zk_paths.CONFIG_CHANGE_PREFIX)]
        for child in sorted(ours, key=sequence_number):
            seq = sequence_number(child)
            if seq <= self.last_applied:
                continue
            path = zk_paths.config_change(child)
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:  # purged meanwhile by another broker
                self.last_applied = seq
                continue
            self._ctimes[child] = stat.ctime
            entity = parse_change(data, path)
            if entity is not None and entity[0] in self.entity_types:
                self.on_change(read_entity_config(self.zk, *entity))
            self.last_applied = seq

    def _purge(self, children: list[str]) -> None:
        """Delete the notifications older than the expiration (Kafka's
        purgeObsoleteNotifications); any broker may, the first one wins."""
        from kazoo.exceptions import NoNodeError

        present = set(children)
        self._ctimes = {c: t for c, t in self._ctimes.items() if c in present}
        now_ms = self.clock() * 1000
        for child, ctime in sorted(self._ctimes.items()):
            if now_ms - ctime > self.expiration_ms:
                with contextlib.suppress(NoNodeError):
                    self.zk.delete(zk_paths.config_change(child))
                self._ctimes.pop(child, None)
                log.debug("purged config change notification %s", child)
