"""How this broker connects to the other brokers of its cluster, from Kafka's keys.

- The listener: `inter.broker.listener.name`, else the listener named after
  `security.inter.broker.protocol` (Kafka's rule; only one of the two may be set), else
  PLAINTEXT when there is such a listener, else the first advertised listener.
- SASL: `sasl.mechanism.inter.broker.protocol` (default: the listener's first enabled
  mechanism; it must be enabled on the listener), the client credentials from the
  listener's JAAS config `username="..." password="..."` (looked up as Kafka does:
  `listener.name.<l>.<mechanism>.sasl.jaas.config`, `listener.name.<l>.sasl.jaas.config`,
  `sasl.jaas.config`).
- TLS: the broker's keystore as client certificate, its truststore to check the others
  (`ssl.endpoint.identification.algorithm` empty turns the host name check off); the
  context is replaced when the listener's keystore or truststore changes at run time, for
  the connections made from then on.
"""

from __future__ import annotations

import ssl

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.security.jaas import JaasConfigError, parse_jaas_config
from kafkactl.broker.security.listeners import ListenerSecurity, SecurityConfigError
from kafkactl.broker.security.ssl_context import SslConfigError, client_context
from kafkactl.cluster.broker_connection import InterBrokerSecurity, InterBrokerTls

HOSTNAME_KEY = "ssl.endpoint.identification.algorithm"


def inter_broker_listener(cfg: BrokerConfig, listeners: dict[str, ListenerSecurity]) -> str:
    name = cfg.get("inter.broker.listener.name").strip().upper()
    protocol = cfg.get("security.inter.broker.protocol").strip().upper()
    if name and protocol:
        raise SecurityConfigError(
            "only one of inter.broker.listener.name and security.inter.broker.protocol may "
            "be set")
    advertised = [e.listener for e in cfg.advertised_listeners]
    if protocol:
        name = protocol if protocol in listeners else next(
            (n for n in advertised if listeners[n].protocol == protocol), protocol)
    if not name:
        name = "PLAINTEXT" if "PLAINTEXT" in advertised else advertised[0]
    if name not in advertised:
        raise SecurityConfigError(
            f"the inter-broker listener {name} must be an advertised listener "
            f"(advertised.listeners={cfg.get('advertised.listeners') or cfg.get('listeners')})")
    return name


def _jaas_credentials(cfg: BrokerConfig, listener: str, mechanism: str) -> tuple[str, str]:
    prefix = f"listener.name.{listener.lower()}."
    for key in (f"{prefix}{mechanism.lower()}.sasl.jaas.config", f"{prefix}sasl.jaas.config",
                "sasl.jaas.config"):
        text = cfg.props.get(key, "").strip()
        if not text:
            continue
        try:
            modules = parse_jaas_config(text)
        except JaasConfigError as e:
            raise SecurityConfigError(f"{key}=(value not shown): {e}") from None
        for m in modules:
            if m.options.get("username") and "password" in m.options:
                return m.options["username"], m.options["password"]
        raise SecurityConfigError(
            f"{key} has no username=\"...\" password=\"...\": the broker needs them to "
            f"authenticate to the other brokers on listener {listener} with {mechanism}")
    raise SecurityConfigError(
        f"the inter-broker listener {listener} uses SASL but no JAAS config gives this "
        f"broker's own {mechanism} credentials: set {prefix}{mechanism.lower()}."
        "sasl.jaas.config with username=\"...\" password=\"...\"")


def _check_hostname(cfg: BrokerConfig, listener: str) -> bool:
    for key in (f"listener.name.{listener.lower()}.{HOSTNAME_KEY}", HOSTNAME_KEY):
        if key in cfg.props:
            return cfg.props[key].strip().lower() == "https"
    return True


def inter_broker_security(cfg: BrokerConfig,
                          listeners: dict[str, ListenerSecurity]) -> InterBrokerSecurity:
    """How to reach the other brokers; SecurityConfigError for what cannot work."""
    name = inter_broker_listener(cfg, listeners)
    sec = listeners[name]
    mechanism = username = password = ""
    if sec.uses_sasl:
        mechanism = (cfg.get("sasl.mechanism.inter.broker.protocol").strip().upper()
                     or sec.sasl_mechanisms[0])
        if mechanism not in sec.sasl_mechanisms:
            raise SecurityConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the "
                f"inter-broker listener {name} (sasl.enabled.mechanisms="
                f"{','.join(sec.sasl_mechanisms)})")
        username, password = _jaas_credentials(cfg, name, mechanism)
    tls = InterBrokerTls(client_tls_context(cfg, name)) if sec.uses_tls else None
    return InterBrokerSecurity(name, sec.protocol, mechanism, username, password, tls)


def client_tls_context(cfg: BrokerConfig, listener: str, *,
                       check_hostname: bool | None = None) -> ssl.SSLContext:
    """The context this broker connects to the others' TLS `listener` with, from `cfg`
    (at start, and again when the listener's keystore or truststore changes at run time:
    kafkactl.broker.security.listener_reconfig); `check_hostname` None: from
    ssl.endpoint.identification.algorithm. SecurityConfigError for what cannot be loaded."""
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> str:
        return (cfg.props.get(prefix + key) or cfg.get(key) or "").strip()

    try:
        return client_context(get, listener, check_hostname=_check_hostname(cfg, listener)
                              if check_hostname is None else check_hostname)
    except SslConfigError as e:
        raise SecurityConfigError(str(e)) from None
