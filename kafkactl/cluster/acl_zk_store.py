"""ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them in ZooKeeper mode.

    /kafka-acl/<ResourceType>/<name>                     LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                 "Topic:<name>" (a LITERAL change)
    /kafka-acl-extended-changes/acl_changes_<seq>        {"version":1,"resourceType":"TOPIC",
                                                          "name":..,"patternType":"PREFIXED"}

A write reads the resource's znode with its zkVersion and writes it back conditionally
(creating it when absent, deleting it when empty), retrying on a conflict, so two brokers
adding ACLs to one resource at once lose neither; then it adds a change notification. Every
broker watches both change paths and reloads the resources named there.

The store is generic over the binding type B: the broker (which owns its ACL model) gives
`to_binding` / `from_binding` between B and (AclResource, AclEntry) in Kafka's names, so
this layer stays below the broker's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json
from kafkactl.cluster.zookeeper import sequence_number as _sequence

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

LITERAL = "LITERAL"
PREFIXED = "PREFIXED"
ACL_ZNODE_VERSION = 1
CHANGE_EVENT_VERSION = 1
CHANGE_EXPIRATION_S = 15 * 60  # Kafka purges notifications older than 15 minutes
MAX_WRITE_ATTEMPTS = 50
# Kafka's resource type names in znode paths (SecurityUtils.resourceTypeName).
RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")


def pascal_case(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId (Kafka's names in ACL znodes)."""
    return "".join(word.capitalize() for word in name.split("_"))


def upper_snake(name: str) -> str:
    """TransactionalId (or TRANSACTIONAL_ID) -> TRANSACTIONAL_ID."""
    if "_" in name or name.isupper():
        return name.upper()
    return "".join(("_" + c if c.isupper() and i else c) for i, c in enumerate(name)).upper()


@dataclass(frozen=True, slots=True)
class AclResource:
    """A resource pattern in Kafka's znode names: type "Topic", pattern LITERAL/PREFIXED."""

    resource_type: str
    pattern_type: str
    name: str

    @property
    def path(self) -> str:
        return zk_paths.acl_resource(self.resource_type, self.pattern_type, self.name)

    def __str__(self) -> str:  # Kafka's ResourcePattern.toString
        return (f"ResourcePattern(resourceType={upper_snake(self.resource_type)}, "
                f"name={self.name}, patternType={self.pattern_type})")


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One entry of a resource's znode (Kafka's AclEntry JSON, its names)."""

    principal: str
    permission_type: str  # Allow | Deny
    operation: str  # Read, Write, ClusterAction, ...
    host: str

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "permissionType": self.permission_type,
                "operation": self.operation, "host": self.host}

    @classmethod
    def from_json(cls, d: Any) -> AclEntry:
        if not isinstance(d, dict):
            raise ValueError(f"an ACL entry must be an object, not {d!r}")
        return cls(str(d["principal"]), str(d["permissionType"]), str(d["operation"]),
                   str(d["host"]))


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    ordered = sorted(entries, key=lambda e: (e.principal, e.permission_type, e.operation,
                                             e.host))
    return encode_json({"version": ACL_ZNODE_VERSION, "acls": [e.to_json() for e in ordered]})


def decode_acls(data: bytes | None, path: str) -> frozenset[AclEntry]:
    """The entries of a resource znode; malformed JSON or entries are logged and skipped."""
    value = decode_json(data, path)
    if value is None:
        return frozenset()
    out = set()
    for d in value.get("acls") or [] if isinstance(value, dict) else []:
        try:
            out.add(AclEntry.from_json(d))
        except (KeyError, ValueError) as e:
            log.warning("ignoring a malformed ACL entry in znode %s: %s", path, e)
    return frozenset(out)


def encode_change(resource: AclResource) -> bytes:
    if resource.pattern_type == LITERAL:
        return f"{resource.resource_type}:{resource.name}".encode()
    return encode_json({"version": CHANGE_EVENT_VERSION,
                        "resourceType": upper_snake(resource.resource_type),
                        "name": resource.name, "patternType": resource.pattern_type})


def decode_change(data: bytes, literal: bool) -> AclResource:
    """The resource a change notification names; ValueError when it names none."""
    text = data.decode("utf-8")
    if literal:
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:name, got {text!r}")
        return AclResource(pascal_case(upper_snake(rtype)), LITERAL, name)
    event = json.loads(text)
    if not isinstance(event, dict) or int(event.get("version", 0)) > CHANGE_EVENT_VERSION:
        raise ValueError(f"unsupported ACL change event {text!r}")
    return AclResource(pascal_case(upper_snake(str(event["resourceType"]))),
                       upper_snake(str(event["patternType"])), str(event["name"]))


B = TypeVar("B")
ToBinding = Callable[[AclResource, AclEntry], B]
FromBinding = Callable[[B], tuple[AclResource, AclEntry]]


class ZkAclStore(Generic[B]):
    """The broker's AclStore in a ZooKeeper cluster: a cache of every resource's entries,
    loaded at start and kept current by the change notifications."""

    def __init__(self, zk: KazooClient, to_binding: ToBinding[B],
                 from_binding: FromBinding[B]) -> None:
        self.zk = zk
        self._to_binding = to_binding
        self._from_binding = from_binding
        self._lock = threading.Lock()
        self._acls: dict[AclResource, frozenset[AclEntry]] = {}
        self._bindings: frozenset[B] = frozenset()
        self._seen: dict[str, int] = {}  # change path -> last sequence number processed

    # ---- start: load everything, then follow the notifications ---------------------------
    def start(self) -> None:
        """Blocking: load every ACL and watch the change paths."""
        from kazoo.recipe.watchers import ChildrenWatch

        for path in (zk_paths.ACL_CHANGES, zk_paths.ACL_EXTENDED_CHANGES):
            self.zk.ensure_path(path)
            children = self.zk.get_children(path)
            self._seen[path] = max((_sequence(c) for c in children), default=-1)
        self._load_all()
        for path in (zk_paths.ACL_CHANGES, zk_paths.ACL_EXTENDED_CHANGES):
            ChildrenWatch(self.zk, path,
                          lambda children, p=path: self._on_changes(p, children))

    def _load_all(self) -> None:
        from kazoo.exceptions import NoNodeError

        found: dict[AclResource, frozenset[AclEntry]] = {}
        for pattern, root in ((LITERAL, zk_paths.ACL), (PREFIXED, zk_paths.ACL_PREFIXED)):
            try:
                types = self.zk.get_children(root)
            except NoNodeError:
                continue
            for rtype in types:
                try:
                    names = self.zk.get_children(f"{root}/{rtype}")
                except NoNodeError:
                    continue
                for name in names:
                    resource = AclResource(rtype, pattern, name)
                    entries = self._read(resource)[0]
                    if entries:
                        found[resource] = entries
        with self._lock:
            self._acls = found
            self._rebuild()

    def _on_changes(self, path: str, children: list[str]) -> bool:
        from kazoo.exceptions import NoNodeError

        last = self._seen.get(path, -1)
        fresh = sorted((c for c in children if _sequence(c) > last), key=_sequence)
        for child in fresh:
            try:
                data, stat = self.zk.get(f"{path}/{child}")
            except NoNodeError:
                continue
            except Exception as e:  # ZooKeeper away: the watch fires again when back
                log.warning("reading ACL change %s/%s failed: %s", path, child, e)
                return True
            try:
                resource = decode_change(data, path == zk_paths.ACL_CHANGES)
                self.reload(resource)
            except (ValueError, KeyError, UnicodeDecodeError) as e:
                log.warning("ignoring ACL change notification %s/%s: %s", path, child, e)
            self._seen[path] = _sequence(child)
            self._purge(path, child, stat.ctime)
        return True

    def _purge(self, path: str, child: str, ctime_ms: int) -> None:
        if time.time() - ctime_ms / 1000 > CHANGE_EXPIRATION_S:
            from kazoo.exceptions import NoNodeError

            with contextlib.suppress(NoNodeError):
                self.zk.delete(f"{path}/{child}")

    def reload(self, resource: AclResource) -> None:
        """Read one resource's znode again (after a change notification)."""
        entries, version = self._read(resource)
        log.info("Processing Acl change notification for %s, %d ACL(s), zkVersion : %d",
                 resource, len(entries), version)
        self._cache(resource, entries)

    def _rebuild(self) -> None:
        out = set()
        for resource, entries in self._acls.items():
            for entry in entries:
                try:
                    out.add(self._to_binding(resource, entry))
                except (ValueError, KeyError) as e:  # a znode written by hand, or newer
                    log.warning("ignoring ACL %s on %s: %s", entry, resource.path, e)
        self._bindings = frozenset(out)

    def _read(self, resource: AclResource) -> tuple[frozenset[AclEntry], int]:
        """(entries, zkVersion); version -1 when the znode does not exist."""
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self.zk.get(resource.path)
        except NoNodeError:
            return frozenset(), -1
        return decode_acls(data, resource.path), stat.version

    # ---- the AclStore interface --------------------------------------------------------------
    def bindings(self) -> frozenset[B]:
        return self._bindings

    def add(self, bindings: Iterable[B]) -> None:
        self._update(bindings, adding=True)

    def remove(self, bindings: Iterable[B]) -> None:
        self._update(bindings, adding=False)

    def _update(self, bindings: Iterable[B], *, adding: bool) -> None:
        by_resource: dict[AclResource, set[AclEntry]] = {}
        for b in bindings:
            resource, entry = self._from_binding(b)
            problem = zk_paths.znode_name_problem(resource.name)
            if problem is not None:  # the broker refuses such names; this keeps a binding
                # adopted from an old acls.json from writing onto another znode
                log.warning("not %s the ACL %s on %s %r in ZooKeeper: %s",
                            "adding" if adding else "removing", entry,
                            resource.resource_type, resource.name, problem)
                continue
            by_resource.setdefault(resource, set()).add(entry)
        for resource, entries in by_resource.items():
            if self._update_resource(resource, entries, adding=adding):
                self._notify(resource)

    def _update_resource(self, resource: AclResource, entries: set[AclEntry], *,
                         adding: bool) -> bool:
        """Apply a change to one resource znode with a conditional write; True when the
        znode changed."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(MAX_WRITE_ATTEMPTS):
            current, version = self._read(resource)
            wanted = current | entries if adding else current - entries
            if wanted == current:
                self._cache(resource, current)
                return False
            try:
                if version < 0:
                    self.zk.create(resource.path, encode_acls(wanted), makepath=True)
                elif not wanted:
                    self.zk.delete(resource.path, version=version)
                else:
                    self.zk.set(resource.path, encode_acls(wanted), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it meanwhile: read again
            log.info("Updated ACLs for %s with new version %d", resource,
                     -1 if not wanted else version + 1)
            self._cache(resource, frozenset(wanted))
            return True
        raise RuntimeError(f"could not update ACL znode {resource.path}: it kept changing")

    def _cache(self, resource: AclResource, entries: frozenset[AclEntry]) -> None:
        with self._lock:
            if entries:
                self._acls[resource] = entries
            else:
                self._acls.pop(resource, None)
            self._rebuild()

    def _notify(self, resource: AclResource) -> None:
        path = (zk_paths.ACL_CHANGES if resource.pattern_type == LITERAL
                else zk_paths.ACL_EXTENDED_CHANGES)
        self.zk.create(f"{path}/{zk_paths.ACL_CHANGE_PREFIX}", encode_change(resource),
                       sequence=True, makepath=True)
