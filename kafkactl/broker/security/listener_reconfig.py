"""The dynamic broker configs of the listeners' security (KIP-226), as Kafka applies them.

At start, the listeners' security (kafkactl.broker.security.listeners) is built from
server.properties overridden by the stored dynamic broker configs
(`with_stored_dynamic_configs`): every ssl.* and sasl.* key, plain or
`listener.name.<listener>.`-prefixed, so a keystore, a client-authentication rule or a
listener's JAAS users set with AlterConfigs hold after a restart. `listeners`,
`advertised.listeners` and `listener.security.protocol.map` stay server.properties' (this
broker does not add, remove or re-map a listener).

At run time (`ListenerTlsReconfigurer`), a change of a security key is first checked as a
start would check it: every listener's security is built again with the new configs
(keystores and truststores read, JAAS parsed), and a change with which the broker could not
start is refused (ConfigError, INVALID_CONFIG, naming the key and why: an unreadable
keystore, a PEM that is no key, a listener that does not use TLS), before it is stored, so
the listeners keep their contexts. Once stored, each TLS listener whose SSL context keys
(kafkactl.broker.security.ssl_context.CONTEXT_KEYS: keystore, truststore, client authentication,
protocols, ciphers) changed gets the context built by the check: its acceptor hands it to
the connections accepted from then on (Kafka's SslFactory reconfiguration); open
connections keep theirs. The SASL keys apply at the next start, as in Kafka.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.dynamic_config_store import DynamicConfigFile
from kafkactl.broker.security.listeners import (
    ListenerKeys,
    ListenerSecurity,
    SecurityConfigError,
    check_broker_security,
    is_security_key,
)
from kafkactl.broker.security.ssl_context import CONTEXT_KEYS
from kafkactl.log.errors import ConfigError

if TYPE_CHECKING:
    from kafkactl.broker.dynamic_config import DynamicBrokerConfig

log = logging.getLogger(__name__)

# Listener keys read from server.properties only.
STATIC_LISTENER_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map")


def security_props(static: Mapping[str, str], effective: Mapping[str, str]) -> dict[str, str]:
    """The keys the listeners' security is built from: the `effective` broker configs but
    for STATIC_LISTENER_KEYS, whose values are the `static` ones."""
    props = dict(effective)
    for key in STATIC_LISTENER_KEYS:
        if key in static:
            props[key] = static[key]
        else:
            props.pop(key, None)
    return props


def with_stored_dynamic_configs(cfg: BrokerConfig, path: Path) -> BrokerConfig:
    """`cfg` with the dynamic broker configs stored in `path` over it, for building the
    listeners' security at start (ConfigError when the file is damaged or a stored password
    cannot be decrypted)."""
    stored = DynamicConfigFile(path, str(cfg.broker_id), cfg.props, cfg.is_sensitive).read()
    dynamic = {**stored.default, **stored.broker}
    keys = sorted(k for k in dynamic if is_security_key(k))
    if not keys:
        return cfg
    log.info("listener security from server.properties and the dynamic broker configs in "
             "%s: %s", path, ", ".join(keys))
    return BrokerConfig(security_props(cfg.props, {**cfg.props, **dynamic}))


def _security_keys(props: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if is_security_key(k)}


def tls_settings(listeners: Mapping[str, ListenerSecurity],
                 props: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Each TLS listener's values of the keys of its SSL context."""
    cfg = BrokerConfig(dict(props))
    out: dict[str, dict[str, str]] = {}
    for name, sec in listeners.items():
        if sec.uses_tls:
            keys = ListenerKeys(cfg, name)
            out[name] = {k: keys.get(k) for k in sorted(CONTEXT_KEYS)}
    return out


class TlsAcceptor(Protocol):
    """What a listener's acceptor (kafkactl.broker.network.Acceptor) offers here: the
    context it wraps each connection it accepts in."""

    listener: str
    tls: ssl.SSLContext | None


class ListenerTlsReconfigurer:
    """Keeps the TLS listeners' SSL contexts (in `listeners`, and in the `acceptors` that
    use them) those of the dynamic broker configs."""

    def __init__(self, listeners: Mapping[str, ListenerSecurity],
                 acceptors: Sequence[TlsAcceptor]) -> None:
        self.listeners = listeners
        self.acceptors = acceptors
        self.static: dict[str, str] = {}
        self._applied: dict[str, dict[str, str]] = {}
        # the last change checked: its props and the listeners' security built with them
        self._checked: tuple[dict[str, str], dict[str, ListenerSecurity]] | None = None

    def register(self, dynamic: DynamicBrokerConfig) -> None:
        """Check and apply each change of `dynamic` from now on."""
        self.static = dict(dynamic.static)
        self._applied = tls_settings(self.listeners,
                                     security_props(self.static, dynamic.config.props))
        dynamic.validators.append(self.validate)
        dynamic.reconfigurables.append(self.reconfigure)

    def validate(self, current: Mapping[str, str], new: Mapping[str, str]) -> None:
        """ConfigError when the listeners' security cannot be built with `new`."""
        new_props = security_props(self.static, new)
        if _security_keys(new_props) == _security_keys(security_props(self.static, current)):
            return
        self._check(new_props)

    def _check(self, props: dict[str, str]) -> dict[str, ListenerSecurity]:
        if self._checked is not None and self._checked[0] == props:
            return self._checked[1]
        try:
            built = check_broker_security(BrokerConfig(props))
        except SecurityConfigError as e:
            raise ConfigError(f"Invalid dynamic configuration: {e}") from None
        self._checked = (props, built)
        return built

    def reconfigure(self, effective: Mapping[str, str]) -> None:
        """Give each TLS listener whose SSL keys changed its new context, for the
        connections it accepts from now on."""
        props = security_props(self.static, effective)
        wanted = tls_settings(self.listeners, props)
        changed = {name: sorted(k for k, v in values.items()
                                if self._applied.get(name, {}).get(k) != v)
                   for name, values in wanted.items() if values != self._applied.get(name)}
        if not changed:
            return
        try:
            built = self._check(props)
        except ConfigError as e:  # checked before it was stored: a file changed meanwhile
            log.error("the TLS listeners keep their SSL contexts: %s", e)
            return
        for name, keys in changed.items():
            sec, new = self.listeners[name], built[name]
            sec.ssl_context, sec.principal_mapper = new.ssl_context, new.principal_mapper
            for acceptor in self.acceptors:
                if acceptor.listener == name:
                    acceptor.tls = new.ssl_context
            log.info("listener %s: the connections it accepts from now on use its new SSL "
                     "settings (%s changed); open connections keep theirs", name,
                     ", ".join(keys))
        self._applied = wanted
        self._checked = None
