"""Where ACL bindings live: a small interface (AclStore) so a ZooKeeper store (Kafka's
/kafka-acl/<ResourceType>/<name> znodes) can stand beside the standalone one, which keeps
them in `<data dir>/acls.json`, written crash-safely (store_file)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from kafkactl.broker.security.acl import AclBinding, InvalidAcl
from kafkactl.broker.security.store_file import StoreFileError, read_json, write_json

FILE_NAME = "acls.json"


class AclStore(Protocol):
    def bindings(self) -> frozenset[AclBinding]: ...

    def add(self, bindings: Iterable[AclBinding]) -> None: ...

    def remove(self, bindings: Iterable[AclBinding]) -> None: ...


class FileAclStore:
    """ACL bindings in one crash-safe JSON file: {"version": 1, "acls": [binding...]}."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._bindings: frozenset[AclBinding] = frozenset()

    def load(self) -> None:
        data = read_json(self.path, 1)
        try:
            self._bindings = frozenset(AclBinding.from_dict(d) for d in data.get("acls", []))
        except (InvalidAcl, KeyError, TypeError, AttributeError) as e:
            raise StoreFileError(f"{self.path} is damaged: {e}") from None

    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._write(self._bindings | frozenset(bindings))

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._write(self._bindings - frozenset(bindings))

    def _write(self, bindings: frozenset[AclBinding]) -> None:
        if bindings == self._bindings:
            return
        ordered = sorted((b.to_dict() for b in bindings), key=lambda d: sorted(
            (k, str(v)) for k, v in d.items()))
        write_json(self.path, {"version": 1, "acls": ordered})
        self._bindings = bindings
