"""Where SCRAM credentials live: a small interface (CredentialStore) so a ZooKeeper store
(Kafka's /config/users/<user> znodes) can stand beside the standalone one, which keeps them
in `<data dir>/scram-credentials.json` (salted and hashed, never a password)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from kafkactl.broker.security.store_file import StoreFileError, read_json, write_json
from kafkactl.protocol.scram import MECHANISMS, ScramCredential, ScramError

FILE_NAME = "scram-credentials.json"


class CredentialStore(Protocol):
    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def users(self) -> dict[str, dict[str, ScramCredential]]: ...

    def alter(self, upserts: dict[tuple[str, str], ScramCredential],
              deletions: set[tuple[str, str]]) -> None: ...


class FileCredentialStore:
    """SCRAM credentials in one crash-safe JSON file: {"version": 1, "users": {user:
    {mechanism: "salt=...,stored_key=...,server_key=...,iterations=N"}}}."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        data = read_json(self.path, 1)
        users: dict[str, dict[str, ScramCredential]] = {}
        try:
            for user, creds in dict(data.get("users", {})).items():
                users[str(user)] = {m: ScramCredential.from_text(t) for m, t in creds.items()
                                    if m in MECHANISMS}
        except (ScramError, AttributeError, TypeError) as e:
            raise StoreFileError(f"{self.path} is damaged: {e}") from None
        self._users = users

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(c) for u, c in self._users.items()}

    def alter(self, upserts: dict[tuple[str, str], ScramCredential],
              deletions: set[tuple[str, str]]) -> None:
        with self._lock:
            users = self.users()
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for (user, mechanism), cred in upserts.items():
                users.setdefault(user, {})[mechanism] = cred
            users = {u: c for u, c in users.items() if c}
            write_json(self.path, {"version": 1, "users": {
                u: {m: c.to_text() for m, c in creds.items()} for u, creds in users.items()}})
            self._users = users
