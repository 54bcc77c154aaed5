"""Each listener's security, from Kafka's keys: `listeners`, `listener.security.protocol.map`,
`ssl.*` and `sasl.*` (each also as `listener.name.<listener>.<key>`, the listener-specific
value winning), `sasl.enabled.mechanisms`, the PLAIN users of
`listener.name.<listener>.plain.sasl.jaas.config`, `connections.max.reauth.ms` (also
per mechanism: `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`).

`ssl.client.auth` set broker-wide applies to SSL listeners only; a SASL_SSL listener asks
for client certificates only with `listener.name.<listener>.ssl.client.auth` (KIP-684,
Kafka's ChannelBuilders), and the broker-wide key set with SASL_SSL listeners is warned
about, as Kafka does.

What this broker cannot honour is a start-up error naming the key (SecurityConfigError),
never a silent downgrade: JKS/PKCS12 stores, GSSAPI and OAUTHBEARER, custom callback
handlers, principal builders and authorizers, and security keys that no listener uses.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from dataclasses import dataclass, field

from kafkactl.broker.config import BrokerConfig, Endpoint, parse_listeners
from kafkactl.broker.peer_log import PeerLogLimiter
from kafkactl.broker.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users
from kafkactl.broker.security.jaas import JaasConfigError, plain_users
from kafkactl.broker.security.principal import SslPrincipalMapper
from kafkactl.broker.security.ssl_context import SslConfigError, server_context
from kafkactl.protocol.scram import MECHANISMS as SCRAM_MECHANISMS

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
UNSUPPORTED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
# Kafka's limit on a request before authentication completes (sasl.server.max.receive.size).
SASL_MAX_RECEIVE_DEFAULT = 524288
# Keys naming classes this broker cannot load.
_CLASS_KEYS = ("sasl.server.callback.handler.class", "principal.builder.class",
               "ssl.principal.builder.class", "sasl.login.class",
               "sasl.login.callback.handler.class", "ssl.engine.factory.class")


class SecurityConfigError(ValueError):
    """Security configuration the broker cannot honour; the message names the key."""


@dataclass
class ListenerSecurity:
    """How one named listener authenticates its clients."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper = field(default_factory=SslPrincipalMapper)
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0  # the listener's connections.max.reauth.ms
    # each enabled mechanism's session lifetime (listener.name.<l>.<mechanism>.
    # connections.max.reauth.ms over the listener's): what SaslAuthenticate answers
    reauth_ms_by_mechanism: dict[str, int] = field(default_factory=dict)
    max_receive_before_auth: int = SASL_MAX_RECEIVE_DEFAULT
    failed_authentications: int = 0  # Kafka's failed-authentication-total, per listener
    successful_authentications: int = 0
    # "Failed authentication with ..." lines: the first per peer in full, then a count a
    # minute (a password guesser must not flood the log)
    failure_log: PeerLogLimiter = field(default_factory=lambda: PeerLogLimiter(
        logging.getLogger("kafkactl.broker.security.sasl"), logging.INFO,
        "failed authentications"), repr=False, compare=False)

    def reauth_ms_for(self, mechanism: str) -> int:
        """The session lifetime of a client authenticated with `mechanism` (0: none)."""
        return self.reauth_ms_by_mechanism.get(mechanism, self.reauth_ms)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    value = cfg.get("listener.security.protocol.map")
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep:
            raise SecurityConfigError(
                f"listener.security.protocol.map={value}: {item!r} must look like "
                "LISTENER_NAME:PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"listener.security.protocol.map={value}: {protocol} (for listener "
                f"{name.strip().upper()}) is not a security protocol "
                f"({', '.join(SECURITY_PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


def listener_protocol(key: str, value: str, name: str, pmap: dict[str, str]) -> str:
    protocol = pmap.get(name, name if name in SECURITY_PROTOCOLS else "")
    if not protocol:
        raise SecurityConfigError(
            f"{key}={value}: listener {name} has no security protocol; map it in "
            f"listener.security.protocol.map (e.g. {name}:PLAINTEXT)")
    return protocol


CLIENT_AUTH_KEY = "ssl.client.auth"


def _protocol_of(cfg: BrokerConfig, listener: str) -> str:
    """`listener`'s security protocol ('' when the protocol map does not say)."""
    try:
        pmap = protocol_map(cfg)
    except SecurityConfigError:  # reported by listener_securities
        pmap = {}
    name = listener.upper()
    return pmap.get(name, name if name in SECURITY_PROTOCOLS else "")


class ListenerKeys:
    """A listener's view of the broker's keys: `listener.name.<l>.<key>` over `<key>`;
    except `ssl.client.auth` of a SASL_SSL listener, which is only the listener's own
    (KIP-684: the broker-wide key applies to SSL listeners only)."""

    def __init__(self, cfg: BrokerConfig, listener: str, protocol: str | None = None) -> None:
        self.cfg = cfg
        self.prefix = f"listener.name.{listener.lower()}."
        self.protocol = _protocol_of(cfg, listener) if protocol is None else protocol

    def key_of(self, key: str) -> str:
        return self.prefix + key if self.cfg.props.get(self.prefix + key) else key

    def get(self, key: str) -> str:
        own = self.cfg.props.get(self.prefix + key)
        if key == CLIENT_AUTH_KEY and self.protocol == "SASL_SSL":
            return (own or "").strip()
        return (own or self.cfg.get(key) or "").strip()

    def broker_wide_client_auth_ignored(self) -> str:
        """The broker-wide ssl.client.auth (other than none) this SASL_SSL listener does
        not apply, for Kafka's warning ('' when there is none)."""
        if self.protocol != "SASL_SSL" or self.cfg.props.get(self.prefix + CLIENT_AUTH_KEY):
            return ""
        value = (self.cfg.get(CLIENT_AUTH_KEY) or "").strip()
        return "" if value.lower() in ("", "none") else value


REAUTH_KEY = "connections.max.reauth.ms"


def _reauth_ms(cfg: BrokerConfig, key: str, default: int) -> int:
    raw = cfg.props.get(key, "").strip()
    if not raw:
        return default
    try:
        return max(0, int(raw))
    except ValueError:
        raise SecurityConfigError(f"{key}={raw}: not a number of milliseconds") from None


def _sasl(keys: ListenerKeys, cfg: BrokerConfig, sec: ListenerSecurity) -> None:
    raw = keys.get("sasl.enabled.mechanisms")
    if not raw:
        raise SecurityConfigError(
            f"listener {sec.name} uses {sec.protocol} but sasl.enabled.mechanisms is unset "
            "(Kafka's default, GSSAPI, is not supported here); set "
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512 and/or PLAIN")
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    for m in mechanisms:
        if m not in SASL_MECHANISMS:
            why = "is not supported yet" if m in UNSUPPORTED_MECHANISMS else "is unknown"
            raise SecurityConfigError(
                f"{keys.key_of('sasl.enabled.mechanisms')}={raw}: {m} {why} (use "
                f"{', '.join(SASL_MECHANISMS)})")
    sec.sasl_mechanisms = mechanisms
    if "PLAIN" in mechanisms:
        key = next((k for k in (f"{keys.prefix}plain.sasl.jaas.config",
                                f"{keys.prefix}sasl.jaas.config", "sasl.jaas.config")
                    if cfg.props.get(k, "").strip()), None)
        if key is None:
            raise SecurityConfigError(
                f"listener {sec.name} enables PLAIN but has no users: set "
                f"{keys.prefix}plain.sasl.jaas.config="
                "'org.apache.kafka.common.security.plain.PlainLoginModule required "
                "user_<name>=\"<password>\";'")
        try:
            sec.plain_users = plain_users(cfg.props[key])
        except JaasConfigError as e:
            raise SecurityConfigError(f"{key}=(value not shown): {e}") from None
    # Kafka's precedence (SaslChannelBuilder.createConnectionsMaxReauthMsMap over the
    # listener-prefixed configs): listener.name.<l>.<mechanism>.connections.max.reauth.ms,
    # then listener.name.<l>.connections.max.reauth.ms, then connections.max.reauth.ms
    sec.reauth_ms = _reauth_ms(cfg, keys.key_of(REAUTH_KEY), 0)
    sec.reauth_ms_by_mechanism = {
        m: _reauth_ms(cfg, f"{keys.prefix}{m.lower()}.{REAUTH_KEY}", sec.reauth_ms)
        for m in mechanisms}
    sec.max_receive_before_auth = cfg.get_int_or("sasl.server.max.receive.size",
                                                 SASL_MAX_RECEIVE_DEFAULT)


_WARNED_CLIENT_AUTH: set[tuple[str, str]] = set()


def listener_securities(cfg: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every listener's security (by name); SecurityConfigError for what cannot work."""
    pmap = protocol_map(cfg)
    out: dict[str, ListenerSecurity] = {}
    for key in ("listeners", "advertised.listeners"):
        value = cfg.get(key)
        for item in filter(None, (s.strip() for s in value.split(","))):
            name = item.partition("://")[0].strip().upper()
            protocol = listener_protocol(key, value, name, pmap)
            if key == "listeners":
                out[name] = ListenerSecurity(name, protocol)
            elif name not in out:
                raise SecurityConfigError(
                    f"{key}={value}: listener {name} is not one of listeners="
                    f"{cfg.get('listeners')}; advertise only listeners the broker has")
    for name, sec in out.items():
        keys = ListenerKeys(cfg, name, sec.protocol)
        ignored = keys.broker_wide_client_auth_ignored()
        if ignored and (name, ignored) not in _WARNED_CLIENT_AUTH:  # once, not per check
            _WARNED_CLIENT_AUTH.add((name, ignored))
            log.warning(
                "Broker configuration 'ssl.client.auth=%s' is applied only to SSL "
                "listeners, not to SASL_SSL listener %s (KIP-684): set "
                "%sssl.client.auth=%s to require client certificates on it too",
                ignored, name, keys.prefix, ignored)
        if sec.uses_tls:
            try:
                sec.ssl_context = server_context(keys.get, name)
                sec.principal_mapper = SslPrincipalMapper(
                    keys.get("ssl.principal.mapping.rules") or "DEFAULT")
            except (SslConfigError, ValueError) as e:
                raise SecurityConfigError(str(e)) from None
        if sec.uses_sasl:
            _sasl(keys, cfg, sec)
    _check_unusable_keys(cfg, out, pmap)
    return out


_SHOWN_VALUES = ("ssl.client.auth", "sasl.enabled.mechanisms", "ssl.keystore.type",
                 "ssl.truststore.type", "ssl.enabled.protocols")
# Keys that ask for TLS identity or client authentication: set where no listener can use
# them, they are an error (the operator believes the broker is protected).
_ENABLING = frozenset({
    "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.location", "ssl.truststore.certificates", "ssl.client.auth",
    "sasl.enabled.mechanisms", "sasl.jaas.config"})


def _split_security_key(key: str) -> tuple[str | None, str] | None:
    """(listener or None, plain ssl.*/sasl.* name) of a security key, else None."""
    listener = None
    if key.startswith("listener.name."):
        listener, _, key = key[len("listener.name."):].partition(".")
        listener = listener.upper()
        mechanism, dot, rest = key.partition(".")
        if dot and mechanism.upper() in (*SASL_MECHANISMS, *UNSUPPORTED_MECHANISMS):
            key = rest
    if key.endswith(".sasl.jaas.config") or key == "sasl.jaas.config":
        return listener, "sasl.jaas.config"
    if key.startswith(("ssl.", "sasl.")) or key in _CLASS_KEYS:
        return listener, key
    return None


def is_security_key(key: str) -> bool:
    """A key listener_securities reads (or refuses): an ssl.* or sasl.* key, plain or of a
    listener, a listener's JAAS config, a key naming a class."""
    return _split_security_key(key) is not None


def _check_unusable_keys(cfg: BrokerConfig, listeners: dict[str, ListenerSecurity],
                         pmap: dict[str, str]) -> None:
    for key, value in sorted(cfg.props.items()):
        split = _split_security_key(key)
        if split is None or not value.strip():
            continue
        listener, plain = split
        shown = value if plain in _SHOWN_VALUES else "(value not shown)"
        if plain in _CLASS_KEYS:
            raise SecurityConfigError(f"{key}={value}: custom classes are not supported; "
                                      "remove the key")
        what = "SSL" if plain.startswith("ssl.") else "SASL"
        scope = [listeners[listener]] if listener in listeners else (
            [] if listener else list(listeners.values()))
        used = any(s.uses_tls if what == "SSL" else s.uses_sasl for s in scope)
        if used:
            continue
        if plain == "ssl.client.auth" and value.strip().lower() == "none":
            continue
        if plain in _ENABLING:
            if not listener:
                where = f"no listener uses {what}"
            elif listener in listeners:
                where = f"listener {listener} does not use {what}"
            else:
                where = f"there is no listener {listener}"
            raise SecurityConfigError(
                f"{key}={shown}: {where} (listeners={cfg.get('listeners')}); add an "
                f"{'SSL or SASL_SSL' if what == 'SSL' else 'SASL_PLAINTEXT or SASL_SSL'} "
                "listener or remove the key")
        log.warning("%s is ignored: no listener uses %s", key, what)


def check_broker_security(cfg: BrokerConfig, *,
                          self_handshake: bool = True) -> dict[str, ListenerSecurity]:
    """All start-up checks of the security keys; returns the listeners' security.
    `self_handshake`: the inter-broker listener's TLS settings complete a handshake with
    themselves (_check_inter_broker_handshake; a dynamic change has checks of its own)."""
    listeners = listener_securities(cfg)
    inter = cfg.get("security.inter.broker.protocol").strip().upper()
    if inter and inter not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(f"security.inter.broker.protocol={inter}: not a security "
                                  f"protocol ({', '.join(SECURITY_PROTOCOLS)})")
    if inter and not any(s.protocol == inter for s in listeners.values()):
        raise SecurityConfigError(
            f"security.inter.broker.protocol={inter}: no listener uses {inter} "
            f"(listeners={cfg.get('listeners')}); add one or set "
            "inter.broker.listener.name")
    inter_name = cfg.get("inter.broker.listener.name").strip().upper()
    if inter_name and inter_name not in listeners:
        raise SecurityConfigError(f"inter.broker.listener.name={inter_name}: no such "
                                  f"listener in listeners={cfg.get('listeners')}")
    authorizer = cfg.get("authorizer.class.name").strip()
    if authorizer and authorizer not in AUTHORIZER_CLASS_NAMES:
        raise SecurityConfigError(
            f"authorizer.class.name={authorizer}: only Kafka's ACL authorizers are "
            f"supported ({', '.join(AUTHORIZER_CLASS_NAMES[:2])})")
    if authorizer:  # the authorizer's key: read (and refused) only with one, as Kafka
        try:
            parse_super_users(cfg.get("super.users"))
        except ValueError as e:
            raise SecurityConfigError(f"super.users={cfg.get('super.users')}: {e}") from None
    for name in ("allow.everyone.if.no.acl.found",):
        if cfg.get(name) and cfg.get(name).strip().lower() not in ("true", "false"):
            raise SecurityConfigError(f"{name}={cfg.get(name)} must be true or false")
    if self_handshake and (cfg.get("zookeeper.connect") or inter_name or inter):
        _check_inter_broker_handshake(cfg, listeners)
    return listeners


def _check_inter_broker_handshake(cfg: BrokerConfig,
                                  listeners: dict[str, ListenerSecurity]) -> None:
    """A TLS inter-broker listener whose own client cannot complete a handshake with its
    own server (its certificate expired, of a CA its truststore does not hold) is a
    start-up error, as Kafka's SslFactory.configure refuses it ("A client SSLEngine
    created with the provided settings can't connect to a server SSLEngine created with
    those settings."): else the broker would start and fail every inter-broker request.
    Checked in a cluster, or when the inter-broker listener is named, as Kafka has one."""
    # (inter_broker imports this module)
    from kafkactl.broker.security.inter_broker import client_tls_context, inter_broker_listener
    from kafkactl.broker.security.tls_reconfig_checks import (
        HandshakeRefused,
        ensure_self_handshake,
    )

    try:
        name = inter_broker_listener(cfg, listeners)
    except SecurityConfigError:
        if cfg.get("zookeeper.connect"):
            raise
        return  # standalone: no inter-broker listener (the server does without one)
    sec = listeners.get(name)
    if sec is None or sec.ssl_context is None:
        return
    client = client_tls_context(cfg, name, check_hostname=False)
    try:
        ensure_self_handshake(sec.ssl_context, client)
    except HandshakeRefused as e:
        raise SecurityConfigError(
            f"the inter-broker listener {name} cannot complete a TLS handshake with "
            f"itself: {e} (a client SSLEngine created with its settings can't connect to a "
            "server SSLEngine created with those settings)") from None


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_exposed(cfg: BrokerConfig, listeners: dict[str, ListenerSecurity]) -> None:
    """The safe-default warning: a PLAINTEXT listener off loopback lets anyone who reaches
    it read, write and delete everything."""
    endpoints: list[Endpoint] = parse_listeners(cfg.get("listeners"))
    for ep in endpoints:
        sec = listeners.get(ep.listener)
        if sec is None or sec.protocol != "PLAINTEXT" or is_loopback(ep.host):
            continue
        acl = " and no authorizer" if not cfg.get("authorizer.class.name").strip() else ""
        log.warning(
            "listener %s binds %s:%d with PLAINTEXT (no TLS, no authentication)%s: anyone "
            "who can reach this port can read, write and delete every topic. Use an SSL, "
            "SASL_SSL or SASL_PLAINTEXT listener (--override listeners=..., ssl.*, sasl.*), "
            "or bind 127.0.0.1", ep.listener, ep.host or "*", ep.port, acl)
