"""SCRAM credentials in ZooKeeper, as Kafka keeps them in ZooKeeper mode.

    /config/users/<sanitized user>       {"version":1,"config":{"SCRAM-SHA-256":
                                          "salt=..,stored_key=..,server_key=..,iterations=4096"}}
    /config/changes/config_change_<seq>  {"version":2,"entity_path":"users/<sanitized user>"}

AlterUserScramCredentials may reach any broker: it rewrites the user's znode conditionally
(zkVersion; other keys of the user's config, e.g. quotas, are kept) and adds a change
notification; every broker watches /config/changes and reloads the users named there. User
names are sanitized as Kafka's Sanitizer does (URL-encoding, space as %20, `*` as %2A).
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json
from kafkactl.cluster.zookeeper import sequence_number as _sequence
from kafkactl.protocol.scram import MECHANISMS, ScramCredential, ScramError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

CONFIG_ZNODE_VERSION = 1
CHANGE_VERSION = 2
MAX_WRITE_ATTEMPTS = 50
USERS_ENTITY = "users"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder (keeps letters, digits, `.-*_`), then
    `+` -> %20 and `*` -> %2A."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def parse_user_config(value: Any, path: str) -> tuple[dict[str, str],
                                                       dict[str, ScramCredential]]:
    """(the whole config, the SCRAM credentials in it); bad credentials are logged."""
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return {}, {}
    config = {str(k): str(v) for k, v in config.items()}
    creds = {}
    for mechanism in MECHANISMS:
        if mechanism in config:
            try:
                creds[mechanism] = ScramCredential.from_text(config[mechanism])
            except ScramError as e:
                log.warning("ignoring the %s credential in znode %s: %s", mechanism, path, e)
    return config, creds


class ZkCredentialStore:
    """The broker's CredentialStore in a ZooKeeper cluster: every user's credentials,
    loaded at start and kept current by the config change notifications."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._seen = -1  # last /config/changes sequence processed

    def start(self, *, watch: bool = True) -> None:
        """Blocking: load every user's credentials and (a broker's store; not a command's,
        which ends at once) watch /config/changes."""
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk.ensure_path(zk_paths.CONFIG_CHANGES)
        self.zk.ensure_path(zk_paths.CONFIG_USERS)
        self._seen = max((_sequence(c) for c in self.zk.get_children(
            zk_paths.CONFIG_CHANGES)), default=-1)
        users = {}
        for child in self.zk.get_children(zk_paths.CONFIG_USERS):
            creds = self._read(child)[1]
            if creds:
                users[desanitize(child)] = creds
        with self._lock:
            self._users = users
        if watch:
            ChildrenWatch(self.zk, zk_paths.CONFIG_CHANGES, self._on_changes)

    def _read(self, sanitized: str) -> tuple[dict[str, str], dict[str, ScramCredential], int]:
        """(config, credentials, zkVersion); version -1 when the znode does not exist."""
        from kazoo.exceptions import NoNodeError

        path = zk_paths.user_config(sanitized)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return {}, {}, -1
        config, creds = parse_user_config(decode_json(data, path), path)
        return config, creds, stat.version

    def _on_changes(self, children: list[str]) -> bool:
        from kazoo.exceptions import NoNodeError

        fresh = sorted((c for c in children if _sequence(c) > self._seen), key=_sequence)
        for child in fresh:
            path = f"{zk_paths.CONFIG_CHANGES}/{child}"
            try:
                data, _ = self.zk.get(path)
            except NoNodeError:
                continue
            except Exception as e:  # ZooKeeper away: the watch fires again when back
                log.warning("reading config change %s failed: %s: %s", path,
                            type(e).__name__, e)
                return True
            value = decode_json(data, path)
            entity = value.get("entity_path") if isinstance(value, dict) else None
            if isinstance(entity, str):
                kind, _, name = entity.partition("/")
                if kind == USERS_ENTITY and name and "/" not in name:
                    self.reload(name)
            self._seen = _sequence(child)
        return True

    def reload(self, sanitized: str) -> None:
        creds = self._read(sanitized)[1]
        with self._lock:  # copy on write: readers on the event loop never see a change
            users = dict(self._users)
            if creds:
                users[desanitize(sanitized)] = creds
            else:
                users.pop(desanitize(sanitized), None)
            self._users = users

    # ---- the CredentialStore interface -------------------------------------------------------
    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(c) for u, c in self._users.items()}

    def alter(self, upserts: dict[tuple[str, str], ScramCredential],
              deletions: set[tuple[str, str]]) -> None:
        changes: dict[str, tuple[dict[str, ScramCredential], set[str]]] = {}
        for (user, mechanism), cred in upserts.items():
            changes.setdefault(user, ({}, set()))[0][mechanism] = cred
        for user, mechanism in deletions:
            changes.setdefault(user, ({}, set()))[1].add(mechanism)
        for user, (put, drop) in changes.items():
            if self._alter_user(user, put, drop):
                self.zk.create(f"{zk_paths.CONFIG_CHANGES}/{zk_paths.CONFIG_CHANGE_PREFIX}",
                               encode_json({"version": CHANGE_VERSION,
                                            "entity_path": f"{USERS_ENTITY}/{sanitize(user)}"}),
                               sequence=True, makepath=True)

    def _alter_user(self, user: str, put: dict[str, ScramCredential], drop: set[str]) -> bool:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        path = zk_paths.user_config(sanitize(user))
        for _ in range(MAX_WRITE_ATTEMPTS):
            config, _, version = self._read(sanitize(user))
            wanted = {k: v for k, v in config.items() if k not in drop}
            wanted.update({m: c.to_text() for m, c in put.items()})
            if wanted == config:
                return False
            data = encode_json({"version": CONFIG_ZNODE_VERSION, "config": wanted})
            try:
                if version < 0:
                    self.zk.create(path, data, makepath=True)
                else:
                    self.zk.set(path, data, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it meanwhile: read again
            self.reload(sanitize(user))
            return True
        raise RuntimeError(f"could not update znode {path}: it kept changing")
