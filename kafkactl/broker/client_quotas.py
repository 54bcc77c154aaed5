"""Client quotas: who they are for, where they are kept, and which one applies (KIP-55).

A quota entity is a user, a client id, or both, each either named or the default
(`<default>`): Kafka's /config/users/U, /config/clients/C, /config/users/U/clients/C. Its
values are the quota keys: producer_byte_rate, consumer_byte_rate (bytes a second),
request_percentage (percent of one request-handler thread, here of the event loop) and
controller_mutation_rate (partitions created or deleted a second).

Or it is an IP address alone (KIP-612), named or the default: Kafka's /config/ips/A and
/config/ips/<default>, whose one key is connection_creation_rate (new connections a second
accepted from that address; a whole number, 0 or more). The address's own quota applies,
else the default's (kafkactl.broker.connection_quotas enforces it on accept).

For a request from user U with client id C, the quota of a key is the first entity of
Kafka's precedence order that sets it:

    /users/U/clients/C, /users/U/clients/<default>, /users/U,
    /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
    /clients/C, /clients/<default>

A standalone broker keeps the quotas in `client-quotas.json` in its first log dir, written
atomically (a new file renamed over the old). A broker of a ZooKeeper cluster keeps them
where Kafka does, /config/users and /config/clients (kafkactl.broker.zk_client_quotas): this
module's store is then its applied view, kept current by the /config/changes notifications.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT = "<default>"  # how Kafka names a default entity in ZooKeeper and kafka-configs
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
IP_CONNECTION_RATE = "connection_creation_rate"
IP_QUOTA_KEYS = (IP_CONNECTION_RATE,)
IP_RATE_MAX = 2**31 - 1  # Kafka's Integer.MAX_VALUE, its default: unlimited
BYTE_RATES = frozenset({"producer_byte_rate", "consumer_byte_rate"})
STORE_FILE = "client-quotas.json"

# an entity: ((entity type, name or None for the default), ...) sorted by type
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """A quota request that cannot be applied; the message says why."""


def entity_of(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of (type, name) pairs (name None: the default), checked."""
    seen: dict[str, str | None] = {}
    for etype, name in parts:
        if etype not in ENTITY_TYPES:
            raise QuotaError(f"unknown quota entity type {etype!r}: use user, client-id "
                             "or ip")
        if etype in seen:
            raise QuotaError(f"the entity names {etype} twice")
        if name == "":
            raise QuotaError(f"an empty {etype} name: give a name or the default")
        seen[etype] = name
    if not seen:
        raise QuotaError("an entity needs a user, a client id, or both (or an ip)")
    if IP in seen:
        if len(seen) > 1:  # Kafka's words (ZkAdminManager)
            raise QuotaError("Invalid quota entity combination, IP entity should not be "
                             "used with user/client ID entity.")
        ip = seen[IP]
        if ip == DEFAULT:  # Kafka takes the default's own name for the default too
            seen[IP] = ip = None
        if ip is not None and ip_address_of(ip) is None:
            raise QuotaError(f"{ip} is not a valid IP address (give an IPv4 or IPv6 "
                             "address, or the default; host names are not resolved)")
    return tuple(sorted(seen.items()))


def ip_address_of(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `text` writes (an IPv4-mapped IPv6 address as its IPv4 address, as a
    dual-stack socket reports an IPv4 peer), None when it is not an IP address."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_ip_entity(entity: Entity) -> bool:
    return len(entity) == 1 and entity[0][0] == IP


def entity_path(entity: Entity) -> str:
    """Kafka's ZooKeeper path of an entity: users/alice/clients/app, clients/<default>,
    ips/10.0.0.1."""
    d = dict(entity)
    if IP in d:
        return f"ips/{d[IP] or DEFAULT}"
    parts = []
    if USER in d:
        parts += ["users", d[USER] or DEFAULT]
    if CLIENT_ID in d:
        parts += ["clients", d[CLIENT_ID] or DEFAULT]
    return "/".join(parts)


def check_key(key: str, entity: Entity | None = None) -> None:
    """`key` is a quota key of `entity` (None: of a user and/or client id entity)."""
    if entity is not None and is_ip_entity(entity):
        if key not in IP_QUOTA_KEYS:  # Kafka's words first
            raise QuotaError(f"Invalid configuration key {key}: an ip entity's only quota "
                             f"key is {IP_CONNECTION_RATE}")
        return
    if key == IP_CONNECTION_RATE:
        raise QuotaError(f"Invalid configuration key {key}: it is a quota of an ip "
                         "entity only (not of a user or client id)")
    if key not in QUOTA_KEYS:
        raise QuotaError(f"unknown quota key {key!r}: use one of {', '.join(QUOTA_KEYS)}")


def check_value(key: str, value: float, entity: Entity | None = None) -> float:
    check_key(key, entity)
    if key == IP_CONNECTION_RATE:  # Kafka: an INT, at least 0 (0: no connection accepted)
        if not math.isfinite(value) or abs(value - round(value)) > 1e-6:
            raise QuotaError(f"Configuration {key} must be a INT value (a whole number of "
                             f"connections a second), not {value}")
        if value < 0 or value > IP_RATE_MAX:
            raise QuotaError(f"{key} must be between 0 and {IP_RATE_MAX}, not {value:g}")
        return float(round(value))
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"{key} must be a positive number, not {value}")
    if key in BYTE_RATES and value != int(value):
        raise QuotaError(f"{key} is a whole number of bytes a second, not {value}")
    return float(value)


def precedence(user: str, client_id: str) -> list[Entity]:
    """The entities whose quotas may apply to (user, client id), first wins."""
    return [
        ((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),), ((CLIENT_ID, None),),
    ]


def checked_ops(ops: Iterable[tuple[str, float | None]], entity: Entity | None = None
                ) -> list[tuple[str, float | None]]:
    """Set (value) or remove (None) operations on quota keys of `entity` (None: a user
    and/or client id), checked; QuotaError if one is bad."""
    checked = [(k, None if v is None else check_value(k, v, entity)) for k, v in ops]
    for k, v in checked:
        if v is None:  # a removal: the key must still be one
            check_key(k, entity)
    return checked


class ClientQuotaStore:
    """The quotas set, by entity; thread-safe; persisted to `path` (None: in memory)."""

    writes_block = False  # True: `alter` waits on a remote store (run it off the event loop)

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._quotas: dict[Entity, dict[str, float]] = {}
        if path is not None and path.exists():
            self._quotas = _load(path)
        # connection_creation_rate by address (None: the default ip), made on each change
        self._ip_rates = _ip_rate_index(self._quotas)

    def start(self) -> None:
        """Blocking: load what a remote store holds (the file store loads when made)."""

    def describe(self, components: list[dict[str, Any]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching DescribeClientQuotas' filter components (match_type 0:
        this name, 1: the default, 2: any), and with `strict` no other entity types."""
        with self._lock:
            items = list(self._quotas.items())
        out = []
        for entity, values in items:
            d = dict(entity)
            if strict and set(d) != {c["entity_type"] for c in components}:
                continue
            if all(_matches(d, c) for c in components):
                out.append((entity, dict(values)))
        return sorted(out, key=lambda x: [(t, n or "") for t, n in x[0]])

    def alter(self, entity: Entity, ops: Iterable[tuple[str, float | None]],
              validate_only: bool = False) -> None:
        """Set (value) or remove (None) quota keys of `entity`; QuotaError if one is bad."""
        checked = checked_ops(ops, entity)
        if validate_only:
            return
        with self._lock:
            values = dict(self._quotas.get(entity, {}))
            for k, v in checked:
                if v is None:
                    values.pop(k, None)
                else:
                    values[k] = v
            if values:
                self._quotas[entity] = values
            else:
                self._quotas.pop(entity, None)
            snapshot = dict(self._quotas)
            if is_ip_entity(entity):
                self._ip_rates = _ip_rate_index(snapshot)
        if self.path is not None:
            _save(self.path, snapshot)

    def replace(self, entity: Entity, values: Mapping[str, float]) -> None:
        """The applied view: `entity`'s quotas are now `values` (none: it has none)."""
        with self._lock:
            quotas = dict(self._quotas)  # copy on write: readers never see a partial change
            if values:
                quotas[entity] = dict(values)
            else:
                quotas.pop(entity, None)
            self._quotas = quotas
            if is_ip_entity(entity):
                self._ip_rates = _ip_rate_index(quotas)

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, Entity] | None:
        """The quota of `key` for (user, client id) and the entity that sets it, or None."""
        with self._lock:
            for entity in precedence(user, client_id):
                values = self._quotas.get(entity)
                if values is not None and key in values:
                    return values[key], entity
        return None

    def ip_connection_rate(self, ip: str) -> float | None:
        """The connection_creation_rate of peer address `ip`: its own entity's, else the
        default ip entity's; None when neither sets one (unlimited)."""
        rates = self._ip_rates  # replaced whole on a change: no lock needed to read it
        if not rates:
            return None
        address = ip_address_of(ip)
        if address is not None and address in rates:
            return rates[address]
        return rates.get(None)

    def empty(self) -> bool:
        return not self._quotas


def _ip_rate_index(quotas: Mapping[Entity, Mapping[str, float]]
                   ) -> dict[ipaddress.IPv4Address | ipaddress.IPv6Address | None, float]:
    out: dict[ipaddress.IPv4Address | ipaddress.IPv6Address | None, float] = {}
    for entity, values in quotas.items():
        if is_ip_entity(entity) and IP_CONNECTION_RATE in values:
            name = entity[0][1]
            address = None if name is None else ip_address_of(name)
            if name is None or address is not None:
                out[address] = values[IP_CONNECTION_RATE]
    return out


def _matches(entity: Mapping[str, str | None], component: Mapping[str, Any]) -> bool:
    etype, kind = component["entity_type"], component["match_type"]
    if etype not in entity:
        return False
    if kind == 0:
        return entity[etype] == component.get("match")
    if kind == 1:
        return entity[etype] is None
    return True


def _load(path: Path) -> dict[Entity, dict[str, float]]:
    data = json.loads(path.read_text())
    out: dict[Entity, dict[str, float]] = {}
    for item in data.get("quotas", []):
        entity = entity_of((t, n) for t, n in item["entity"])
        out[entity] = {k: float(v) for k, v in item["values"].items()}
    return out


def _save(path: Path, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
    doc = {"version": 1, "quotas": [
        {"entity": [list(p) for p in entity], "values": dict(values)}
        for entity, values in sorted(quotas.items(), key=lambda x: entity_path(x[0]))]}
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
