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
the listeners keep their contexts. A TLS listener whose SSL context keys
(kafkactl.broker.security.ssl_context.CONTEXT_KEYS: keystore, truststore, client
authentication, protocols, ciphers) change, or whose keystore or truststore file has other
contents than when it was loaded (a file replaced in place, the alter re-sending its
location or not: Kafka's reloadUpdatedFilesWithoutConfigChange, KIP-687), is also checked
as Kafka's SslFactory.validateReconfiguration checks it
(kafkactl.broker.security.tls_reconfig_checks): the new keystore's certificate keeps the
distinguished name and the subject alternative names of the current one (unless
`ssl.allow.dn.changes` / `ssl.allow.san.changes` are true, listener-prefixed or not), and,
on the inter-broker listener, the current and the new settings complete TLS handshakes
with each other (an expired certificate, one the truststore does not trust, a truststore
that does not trust the broker's own certificate are refused: "Validation of dynamic
config update of SSLFactory failed: ...").

Once stored, each such listener gets the context built by the check: its acceptor hands it
to the connections accepted from then on (Kafka's SslFactory reconfiguration); open
connections keep theirs. The inter-broker listener's change also replaces the client
context of this broker's connections to the others (`InterBrokerSecurity.tls`): the
controller's requests, the replica fetchers, AlterPartition and transaction markers use it
for each connection made from then on (Kafka's reconfigurable inter-broker channel
builders); open ones keep theirs, as in Kafka. The SASL keys apply at the next start, as in
Kafka.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.dynamic_config_store import DynamicConfigFile
from kafkactl.broker.security.inter_broker import client_tls_context
from kafkactl.broker.security.listeners import (
    ListenerKeys,
    ListenerSecurity,
    SecurityConfigError,
    check_broker_security,
    is_security_key,
)
from kafkactl.broker.security.ssl_context import CONTEXT_KEYS, SslConfigError, client_context
from kafkactl.broker.security.tls_reconfig_checks import (
    ALLOW_DN_CHANGES,
    ALLOW_SAN_CHANGES,
    HandshakeRefused,
    KeystoreEntry,
    KeystoreMismatch,
    ensure_compatible,
    ensure_handshakes,
    keystore_entry,
    store_digests,
)
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity
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


def _is_true(value: str) -> bool:
    return value.strip().lower() == "true"


class TlsAcceptor(Protocol):
    """What a listener's acceptor (kafkactl.broker.network.Acceptor) offers here: the
    context it wraps each connection it accepts in."""

    listener: str
    tls: ssl.SSLContext | None


@dataclass
class _Loaded:
    """What a TLS listener's context was built from: its settings, the contents of its
    store files, its keystore's certificate; for the inter-broker listener, a client of
    these settings (host names not checked) for the handshake checks."""

    settings: dict[str, str]
    digests: dict[str, str | None]
    keystore: KeystoreEntry | None = None
    probe_client: ssl.SSLContext | None = None


@dataclass
class _Checked:
    """A change checked and found good: the listeners built with it, the new state of
    each TLS listener it changes, the new client context of the inter-broker connections."""

    key: tuple[object, ...]
    built: dict[str, ListenerSecurity]
    loaded: dict[str, _Loaded] = field(default_factory=dict)
    outgoing: ssl.SSLContext | None = None


class ListenerTlsReconfigurer:
    """Keeps the TLS listeners' SSL contexts (in `listeners`, and in the `acceptors` that
    use them) and the client context of this broker's connections to the others
    (`inter_broker.tls`) those of the dynamic broker configs."""

    def __init__(self, listeners: Mapping[str, ListenerSecurity],
                 acceptors: Sequence[TlsAcceptor], *,
                 inter_broker_listener: str | None = None,
                 inter_broker: InterBrokerSecurity = PLAINTEXT) -> None:
        self.listeners = listeners
        self.acceptors = acceptors
        self.inter_broker = inter_broker
        # the listener Kafka validates a new keystore of with test handshakes
        self.inter_broker_listener = (inter_broker.listener if inter_broker.tls is not None
                                      else inter_broker_listener)
        self.static: dict[str, str] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._checked: _Checked | None = None  # the last change checked

    def register(self, dynamic: DynamicBrokerConfig) -> None:
        """Check and apply each change of `dynamic` from now on."""
        self.static = dict(dynamic.static)
        cfg = BrokerConfig(security_props(self.static, dynamic.config.props))
        for name, (settings, digests) in self._states(cfg).items():
            keys = ListenerKeys(cfg, name)
            loaded = self._loaded[name] = _Loaded(settings, digests, keystore_entry(keys.get))
            if name == self.inter_broker_listener:
                try:
                    loaded.probe_client = client_context(keys.get, name, check_hostname=False)
                except SslConfigError as e:
                    log.warning("listener %s: its keystore and truststore cannot be checked "
                                "against new ones: %s", name, e)
        dynamic.validators.append(self.validate)
        dynamic.reconfigurables.append(self.reconfigure)

    def _states(self, cfg: BrokerConfig) -> dict[str, tuple[dict[str, str],
                                                             dict[str, str | None]]]:
        """Each TLS listener's SSL settings in `cfg` and its store files' digests now."""
        out = {}
        for name, settings in tls_settings(self.listeners, cfg.props).items():
            out[name] = (settings, store_digests(ListenerKeys(cfg, name).get))
        return out

    def _pending(self, states: Mapping[str, tuple[dict[str, str], dict[str, str | None]]]
                 ) -> dict[str, list[str]]:
        """The TLS listeners whose context is to be made again, with why: keys changed, or
        a keystore/truststore file whose contents changed since it was loaded (Kafka
        reloads those on an alter that leaves their configs as they are)."""
        out: dict[str, list[str]] = {}
        for name, (settings, digests) in states.items():
            loaded = self._loaded.get(name)
            if loaded is None:
                continue
            why = [f"{k} changed" for k, v in settings.items()
                   if loaded.settings.get(k) != v]
            if not why:
                why = [f"the file of {k} changed" for k, d in digests.items()
                       if d is not None and d != loaded.digests.get(k)]
            if why:
                out[name] = why
        return out

    def validate(self, current: Mapping[str, str], new: Mapping[str, str]) -> None:
        """ConfigError when the listeners' security cannot be built with `new`, or a
        listener's new keystore or truststore fails Kafka's checks of a reconfiguration."""
        props = security_props(self.static, new)
        cfg = BrokerConfig(props)
        states = self._states(cfg)
        pending = self._pending(states)
        if not pending and \
                _security_keys(props) == _security_keys(security_props(self.static, current)):
            return
        self._check(cfg, states, pending)

    def _check(self, cfg: BrokerConfig,
               states: Mapping[str, tuple[dict[str, str], dict[str, str | None]]],
               pending: Mapping[str, list[str]]) -> _Checked:
        key = (tuple(sorted(cfg.props.items())),
               tuple((n, tuple(sorted(d.items()))) for n, (_s, d) in sorted(states.items())))
        if self._checked is not None and self._checked.key == key:
            return self._checked
        try:
            built = check_broker_security(cfg, self_handshake=False)
        except SecurityConfigError as e:
            raise ConfigError(f"Invalid dynamic configuration: {e}") from None
        checked = _Checked(key, built)
        for name in pending:
            settings, digests = states[name]
            keys = ListenerKeys(cfg, name)
            loaded = checked.loaded[name] = _Loaded(settings, digests, keystore_entry(keys.get))
            try:
                self._validate_listener(name, keys, loaded, built[name])
            except (KeystoreMismatch, HandshakeRefused, SslConfigError) as e:
                raise ConfigError("Validation of dynamic config update of SSLFactory failed: "
                                  f"{e} (listener {name}{_hint(e)})") from None
            tls = self.inter_broker.tls
            if tls is not None and name == self.inter_broker.listener:
                try:
                    checked.outgoing = client_tls_context(
                        cfg, name, check_hostname=tls.context.check_hostname)
                except SecurityConfigError as e:
                    raise ConfigError(f"Invalid dynamic configuration: {e}") from None
        self._checked = checked
        return checked

    def _validate_listener(self, name: str, keys: ListenerKeys, new: _Loaded,
                           new_sec: ListenerSecurity) -> None:
        """Kafka's SslFactory.validateReconfiguration of listener `name`: the keystore's
        certificate keeps its DN and SANs (unless ssl.allow.dn.changes /
        ssl.allow.san.changes), and on the inter-broker listener the current and the new
        settings complete TLS handshakes with each other."""
        old = self._loaded[name]
        ensure_compatible(new.keystore, old.keystore,
                          allow_dn_changes=_is_true(keys.get(ALLOW_DN_CHANGES)),
                          allow_san_changes=_is_true(keys.get(ALLOW_SAN_CHANGES)))
        if name != self.inter_broker_listener:
            return
        new.probe_client = client_context(keys.get, name, check_hostname=False)
        current_server = self.listeners[name].ssl_context
        if old.probe_client is None or current_server is None or new_sec.ssl_context is None:
            return
        ensure_handshakes(current_server=current_server, current_client=old.probe_client,
                          new_server=new_sec.ssl_context, new_client=new.probe_client)

    def reconfigure(self, effective: Mapping[str, str]) -> None:
        """Give each TLS listener whose SSL keys or store files changed its new context,
        for the connections it accepts from now on, and the inter-broker listener's to
        the connections this broker makes to the others from now on."""
        cfg = BrokerConfig(security_props(self.static, effective))
        states = self._states(cfg)
        pending = self._pending(states)
        if not pending:
            return
        try:
            checked = self._check(cfg, states, pending)
        except ConfigError as e:  # checked before it was stored: a file changed meanwhile
            log.error("the TLS listeners keep their SSL contexts: %s", e)
            return
        for name, why in pending.items():
            sec, new = self.listeners[name], checked.built[name]
            sec.ssl_context, sec.principal_mapper = new.ssl_context, new.principal_mapper
            for acceptor in self.acceptors:
                if acceptor.listener == name:
                    acceptor.tls = new.ssl_context
            self._loaded[name] = checked.loaded[name]
            log.info("listener %s: the connections it accepts from now on use its new SSL "
                     "settings (%s); open connections keep theirs", name, ", ".join(why))
        tls = self.inter_broker.tls
        if tls is not None and checked.outgoing is not None:
            tls.replace(checked.outgoing)
            log.info("inter-broker listener %s: the connections this broker makes to the "
                     "other brokers from now on (controller requests, replica fetchers) "
                     "use its new SSL settings; open connections keep theirs",
                     self.inter_broker.listener)
        self._checked = None


def _hint(e: Exception) -> str:
    if isinstance(e, KeystoreMismatch):
        key = ALLOW_DN_CHANGES if "DistinguishedName" in str(e) else ALLOW_SAN_CHANGES
        return (f"; a broker keeps its certificate's identity: to change it, set {key}=true "
                "in server.properties")
    if isinstance(e, HandshakeRefused):
        return (", the inter-broker listener: its current and new keystore and truststore "
                "must trust each other, as the other brokers' must; to move to another CA, "
                "first give every broker a truststore with both CAs")
    return ""
