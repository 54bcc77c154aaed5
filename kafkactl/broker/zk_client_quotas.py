"""Client quotas in ZooKeeper, where Kafka's ZooKeeper mode keeps them (KIP-55).

    /config/users/<user>                    {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client>   (a user and a client id together)
    /config/clients/<client>
    /config/ips/<ip>                        {"version":1,"config":{"connection_creation_rate":"10"}}
    /config/changes/config_change_<seq>     {"version":2,"entity_path":"users/<user>"}
                                            (or "users/<user>/clients/<client>",
                                            "ips/<ip>", "ips/<default>", ...)

A name is sanitized as Kafka's Sanitizer does (cluster/scram_zk_store.py); the default
entity is `<default>` as it is. Byte rates and connection_creation_rate are written as whole
numbers, the other keys as decimals, as Kafka writes them.

A user's znode also holds its SCRAM credentials (keys SCRAM-SHA-256, SCRAM-SHA-512): both
stores change a znode by reading it, changing their own keys only and writing it back
conditionally on the version read (a BadVersion: read again), so neither loses the other's
keys. The write and its change notification are one transaction.

Every broker keeps its applied view (ClientQuotaStore in memory): every quota entity read
at start, then each entity named by a /config/changes notification re-read from ZooKeeper
(ConfigChangeListener) — a broker that was down reads the changes it missed at start.
AlterClientQuotas on any broker writes here, then applies the entity at once on that broker.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.broker.client_quotas import (
    BYTE_RATES,
    CLIENT_ID,
    DEFAULT,
    IP,
    IP_CONNECTION_RATE,
    IP_QUOTA_KEYS,
    QUOTA_KEYS,
    USER,
    ClientQuotaStore,
    Entity,
    checked_ops,
    ip_address_of,
)
from kafkactl.cluster import config_changes, zk_paths
from kafkactl.cluster.config_changes import ConfigChangeListener, EntityConfig
from kafkactl.cluster.scram_zk_store import desanitize, sanitize
from kafkactl.cluster.zookeeper import decode_json, get_all

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

USERS, CLIENTS, IPS = "users", "clients", config_changes.IPS


def _zk_name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _name(zk_name: str) -> str | None:
    return None if zk_name == DEFAULT else desanitize(zk_name)


def entity_location(entity: Entity) -> tuple[str, str]:
    """(entity type, name) of the entity's znode under /config, as in the change
    notification: ("users", "alice"), ("users", "alice/clients/<default>"),
    ("clients", "app"), ("ips", "10.0.0.1"), ("ips", "<default>")."""
    d = dict(entity)
    if IP in d:
        return IPS, _zk_name(d[IP])
    if USER in d:
        name = _zk_name(d[USER])
        if CLIENT_ID in d:
            name += f"/{CLIENTS}/{_zk_name(d[CLIENT_ID])}"
        return USERS, name
    return CLIENTS, _zk_name(d[CLIENT_ID])


def entity_at(entity_type: str, name: str) -> Entity | None:
    """The quota entity of a znode (the inverse of entity_location), None when it is none."""
    parts = name.split("/")
    if entity_type == IPS and len(parts) == 1 and parts[0]:
        ip = _name(parts[0])
        if ip is not None and ip_address_of(ip) is None:
            log.warning("ignoring the quotas of %s/%s: not an IP address", IPS, name)
            return None
        return ((IP, ip),)
    if entity_type == CLIENTS and len(parts) == 1 and parts[0]:
        return ((CLIENT_ID, _name(parts[0])),)
    if entity_type == USERS and len(parts) == 1 and parts[0]:
        return ((USER, _name(parts[0])),)
    if entity_type == USERS and len(parts) == 3 and parts[1] == CLIENTS and parts[0] \
            and parts[2]:
        return ((CLIENT_ID, _name(parts[2])), (USER, _name(parts[0])))
    return None


def quota_values(config: Mapping[str, str] | None, where: str, *, ip: bool = False
                 ) -> dict[str, float]:
    """The quota keys of a znode's config (other keys, e.g. SCRAM credentials, left out):
    an ip entity's (`ip`) or a user's and/or client id's; a value that is not a positive
    number (for connection_creation_rate: not 0 or more) is logged and ignored."""
    out = {}
    keys = IP_QUOTA_KEYS if ip else QUOTA_KEYS
    for key, text in (config or {}).items():
        if key not in keys:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (value == 0 and key != IP_CONNECTION_RATE):
            log.warning("ignoring quota %s=%r of %s: not a positive number", key, text, where)
            continue
        out[key] = value
    return out


def format_value(key: str, value: float) -> str:
    return str(int(value)) if key in BYTE_RATES or key == IP_CONNECTION_RATE \
        else repr(float(value))


class ZkQuotaStore(ClientQuotaStore):
    """The client quotas of a ZooKeeper cluster: `alter` writes ZooKeeper (blocking: run it
    off the event loop); the rest reads the applied view."""

    writes_block = True

    def __init__(self, zk: KazooClient, adopt: Path | None = None) -> None:
        super().__init__(None)
        self.zk = zk
        self.adopt_file = adopt
        self.listener = ConfigChangeListener(zk, self._on_change,
                                             entity_types=(USERS, CLIENTS, IPS))

    def start(self) -> None:
        """Blocking: adopt a standalone data dir's quotas, read every quota entity, then
        follow the change notifications."""
        if self.adopt_file is not None and self.adopt_file.exists():
            self._adopt(self.adopt_file)
        self.load()
        self.listener.start()

    def stop(self) -> None:
        self.listener.stop()

    def load(self) -> None:
        """Every quota entity as ZooKeeper has it now (read pipelined, a round trip a
        level)."""
        zk = self.zk
        zk.ensure_path(zk_paths.entity_configs(USERS))
        zk.ensure_path(zk_paths.entity_configs(CLIENTS))
        zk.ensure_path(zk_paths.entity_configs(IPS))
        names = [(USERS, u) for u in zk.get_children(zk_paths.entity_configs(USERS))]
        names += [(CLIENTS, c) for c in zk.get_children(zk_paths.entity_configs(CLIENTS))]
        names += [(IPS, a) for a in zk.get_children(zk_paths.entity_configs(IPS))]
        client_lists = get_all_children(zk, {u: f"{zk_paths.entity_config(USERS, u)}/{CLIENTS}"
                                             for t, u in names if t == USERS})
        for user, clients in client_lists.items():
            names += [(USERS, f"{user}/{CLIENTS}/{c}") for c in clients]
        paths = {n: zk_paths.entity_config(*n) for n in names}
        for (etype, name), got in get_all(zk, paths).items():
            entity = entity_at(etype, name)
            if entity is None or got is None:
                continue
            value = decode_json(got[0], paths[(etype, name)])
            self.replace(entity, quota_values(config_changes.parse_config(value),
                                              paths[(etype, name)], ip=etype == IPS))

    def _adopt(self, path: Path) -> None:
        """A standalone data dir joining a cluster: its quotas are added to ZooKeeper's (a
        key ZooKeeper already has keeps ZooKeeper's value), then the file is renamed
        `*.adopted`, as the topics, users and ACLs are."""
        local = ClientQuotaStore(path)
        found = local.describe([], False)
        for entity, values in found:
            etype, name = entity_location(entity)

            def update(config: dict[str, str], values: dict[str, float] = values
                       ) -> dict[str, str]:
                for key, value in values.items():
                    config.setdefault(key, format_value(key, value))
                return config

            config_changes.update_entity_config(self.zk, etype, name, update)
        path.rename(path.with_name(path.name + ".adopted"))
        log.info("adopted the quotas of %d entities of %s into ZooKeeper", len(found), path)

    def _on_change(self, change: EntityConfig) -> None:
        entity = entity_at(change.entity_type, change.name)
        if entity is not None:
            self.replace(entity, quota_values(change.config, f"{change.entity_type}/"
                                                             f"{change.name}",
                                              ip=change.entity_type == IPS))

    def alter(self, entity: Entity, ops: Iterable[tuple[str, float | None]],
              validate_only: bool = False) -> None:
        checked = checked_ops(ops, entity)
        if validate_only:
            return
        etype, name = entity_location(entity)

        def update(config: dict[str, str]) -> dict[str, str]:
            for key, value in checked:
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = format_value(key, value)
            return config

        config_changes.update_entity_config(self.zk, etype, name, update)
        # this broker applies it now; the others on the notification
        self._on_change(config_changes.read_entity_config(self.zk, etype, name))


def get_all_children(zk: KazooClient, paths: Mapping[str, str]) -> dict[str, list[str]]:
    """Each znode's children ([] when it does not exist), read pipelined."""
    from kazoo.exceptions import NoNodeError

    pending = [(key, zk.get_children_async(path)) for key, path in paths.items()]
    out: dict[str, list[str]] = {}
    for key, op in pending:
        try:
            out[key] = list(op.get())
        except NoNodeError:
            out[key] = []
    return out
