"""The file that keeps the dynamic broker configs (kafkactl.broker.dynamic_config) across
restarts: `dynamic-broker-configs.json` in the first log dir,
`{"version": 1, "default": {key: value}, "brokers": {"<id>": {key: value}}}`.

It is written as the security stores are (kafkactl.broker.security.store_file: a new file
renamed over the old one, fsynced, mode 0600). The keys Kafka types PASSWORD
(`listener.name.<l>.ssl.key.password`, `...sasl.jaas.config`, ...: BrokerConfig.is_sensitive)
are stored encrypted with `password.encoder.secret` (kafkactl.broker.password_encoder), as
Kafka stores them in ZooKeeper, and decrypted when the file is read; one that the secret
cannot decrypt is decrypted with `password.encoder.old.secret` and written again with the
new secret (Kafka's re-encoding after a change of secret). A clear-text one, written by an
older kafkactl, is read as it is: encrypted at once when a secret is set, else kept with a
warning (naming the key, never the value) until one is.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.broker.config_types import ConfigError
from kafkactl.broker.password_encoder import (
    OLD_SECRET_KEY,
    SECRET_KEY,
    PasswordDecodeError,
    PasswordEncoder,
    encoder_of,
    parse_encoded,
)
from kafkactl.broker.security.store_file import write_json
from kafkactl.log import errors as log_errors

log = logging.getLogger("kafkactl.broker.dynamic_config")

FILE_NAME = "dynamic-broker-configs.json"
HIDDEN = "[hidden]"  # how Kafka logs a password config's value


def loggable(props: Mapping[str, str], is_sensitive: Callable[[str], bool]) -> dict[str, str]:
    """`props` as they may be logged: every sensitive value replaced by Kafka's `[hidden]`."""
    return {k: HIDDEN if is_sensitive(k) else v for k, v in props.items()}


@dataclass
class StoredLayers:
    """What the file holds for one broker, passwords decrypted."""

    default: dict[str, str] = field(default_factory=dict)
    broker: dict[str, str] = field(default_factory=dict)
    reencode: list[str] = field(default_factory=list)  # keys to write (again) encrypted
    clear: list[str] = field(default_factory=list)  # clear-text passwords, no secret to encrypt


class DynamicConfigFile:
    """The file of broker `broker_id`'s dynamic configs, with the password encoders of
    the static broker keys `props`."""

    def __init__(self, path: Path, broker_id: str, props: Mapping[str, str],
                 is_sensitive: Callable[[str], bool]) -> None:
        self.path = path
        self.broker_id = broker_id
        self.is_sensitive = is_sensitive
        self.encoder: PasswordEncoder | None = encoder_of(props, SECRET_KEY)
        self.old_encoder: PasswordEncoder | None = encoder_of(props, OLD_SECRET_KEY)
        # key -> (password, its stored encoding): unchanged passwords keep theirs
        self._encoded: dict[str, tuple[str, str]] = {}

    # ---- reading ----------------------------------------------------------------------------
    def read(self) -> StoredLayers:
        """The stored layers; ConfigError (the broker's: it cannot start) when the file is
        damaged or a password cannot be decrypted."""
        stored = StoredLayers()
        if not self.path.exists():
            return stored
        self._private()
        try:
            data = json.loads(self.path.read_text())
            stored.default = {str(k): str(v) for k, v in data.get("default", {}).items()}
            stored.broker = {str(k): str(v) for k, v in
                             data.get("brokers", {}).get(self.broker_id, {}).items()}
        except (OSError, ValueError, AttributeError) as e:
            raise ConfigError(f"{self.path} is unreadable ({e}); fix or move it away to "
                              "start with the static broker configs only") from e
        for layer in (stored.default, stored.broker):
            for key, value in layer.items():
                if self.is_sensitive(key):
                    layer[key] = self._decode(key, value, stored)
        return stored

    def _private(self) -> None:
        """An older kafkactl wrote the file with mode 0644: make it the owner's only."""
        with contextlib.suppress(OSError):
            if stat.S_IMODE(self.path.stat().st_mode) & 0o077:
                os.chmod(self.path, 0o600)

    def _decode(self, key: str, value: str, stored: StoredLayers) -> str:
        if parse_encoded(value) is None:  # clear text, from an older kafkactl
            (stored.reencode if self.encoder is not None else stored.clear).append(key)
            return value
        if self.encoder is None:
            raise ConfigError(
                f"{self.path}: the dynamic broker config {key} is stored encrypted but "
                f"{SECRET_KEY} is not configured: set it to the secret it was stored with "
                f"(or remove {key} from that file)")
        try:
            password = self.encoder.decode(value)
        except PasswordDecodeError as e:
            if self.old_encoder is not None:
                with contextlib.suppress(PasswordDecodeError):
                    password = self.old_encoder.decode(value)
                    stored.reencode.append(key)
                    return password
            raise ConfigError(
                f"{self.path}: cannot decrypt the dynamic broker config {key} with "
                f"{SECRET_KEY} ({e}): if the secret was changed, set {OLD_SECRET_KEY} to "
                "the secret it was stored with, and the broker stores it again with the "
                f"new one (or remove {key} from that file)") from None
        self._encoded[key] = (password, value)
        return password

    # ---- writing ----------------------------------------------------------------------------
    def require_encoder(self, key: str) -> None:
        """ConfigError (INVALID_CONFIG), in Kafka's words, when password config `key` cannot
        be stored."""
        if self.encoder is None:
            raise log_errors.ConfigError(
                f"Password encoder secret not configured: set {SECRET_KEY} in the broker's "
                f"server.properties to store {key} (dynamic password configs are stored "
                "encrypted with it)")

    def write(self, default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        """Store the cluster default's layer and this broker's (other brokers' layers, in a
        shared file, are kept as they are)."""
        brokers: dict[str, dict[str, str]] = {}
        if self.path.exists():
            try:
                brokers = dict(json.loads(self.path.read_text()).get("brokers", {}))
            except (OSError, ValueError, AttributeError):
                brokers = {}
        brokers[self.broker_id] = self._encode_layer(broker)
        write_json(self.path, {"version": 1, "default": self._encode_layer(default),
                               "brokers": brokers})

    def _encode_layer(self, layer: Mapping[str, str]) -> dict[str, str]:
        return {k: self._encode(k, v) if self.is_sensitive(k) else v for k, v in layer.items()}

    def _encode(self, key: str, value: str) -> str:
        if self.encoder is None:
            return value  # a clear-text one of an older kafkactl (new ones are refused)
        known = self._encoded.get(key)
        if known is not None and known[0] == value:
            return known[1]
        encoded = self.encoder.encode(value)
        self._encoded[key] = (value, encoded)
        return encoded
