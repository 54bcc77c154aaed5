"""Dynamic broker configs (KIP-226): the broker keys that AlterConfigs and
IncrementalAlterConfigs may change without a restart, per broker (resource name = the
broker id) and cluster-wide (resource name ""), persisted in the data dir.

Precedence, highest first: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG (server.properties / --override), DEFAULT_CONFIG.

The dynamic keys are Kafka 3.x's (its DynamicBrokerConfig.AllDynamicConfigs), in kinds:
- APPLIED_KEYS, honoured at run time: the `log.*` defaults of topic configs (retention,
  segments, flush, cleaner, cleanup policy, timestamps, preallocate), `message.max.bytes`,
  `compression.type`, `min.insync.replicas` and `unclean.leader.election.enable`. A change
  re-applies the topic defaults to every open log whose topic does not override the key.
- READ_LIVE_KEYS: the replication throttles, transaction verification, `max.connections`
  and `max.connection.creation.rate` (also per listener; the socket server is told of each
  change through `reconfigurables`).
- TLS_KEYS, the keys of a TLS listener's SSL context (keystore, truststore, client
  authentication, protocols, ciphers), plain or with a `listener.name.<listener>.` prefix:
  applied when the broker starts (over server.properties) and, at run time, to the
  connections the listener accepts after the change (kafkactl.broker.security.
  listener_reconfig; validators refuse, before anything is stored, a change with which a
  listener could not make its context, e.g. an unreadable keystore).
- AT_START_KEYS (the SASL mechanisms and JAAS users of a listener, the inter-broker SASL
  mechanism, `ssl.endpoint.identification.algorithm`): checked as the TLS keys are,
  applied when the broker starts, as Kafka, which reconfigures only keystores and
  truststores at run time.
- STORED_ONLY_KEYS: the rest of Kafka's dynamic keys (listeners, thread pools, connection
  limits per IP, the cleaner's throughput, metric reporters, Kerberos, ...). Their values
  are checked, stored, described and kept across restarts like the others, but this broker
  does not act on them (it has no such knob, or reads it from server.properties only).
Kafka's rules about where a key may be set hold: listener and security keys per broker
only (not in the cluster default), the keystore/truststore keys only with a
`listener.name.<listener>.` prefix. Any other key is refused naming it, as Kafka refuses a
read-only one (`log.retention.hours` too: Kafka's dynamic name is `log.retention.ms`).

The keys Kafka types PASSWORD are stored encrypted with `password.encoder.secret`, and
refused without it, as Kafka does (kafkactl.broker.dynamic_config_store), and logged as
`[hidden]`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafkactl.broker.config import (
    NULL_DEFAULT_KEYS,
    BrokerConfig,
    kafka_default,
    log_default_props,
)
from kafkactl.broker.config_types import key_type_of
from kafkactl.broker.dynamic_config_store import FILE_NAME as FILE_NAME
from kafkactl.broker.dynamic_config_store import DynamicConfigFile, loggable
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.security.ssl_context import CONTEXT_KEYS
from kafkactl.log.config import BROKER_SYNONYMS, LogConfig
from kafkactl.log.config_def import TOPIC_CONFIGS
from kafkactl.log.errors import ConfigError
from kafkactl.log.message_format_version import message_format_version

log = logging.getLogger(__name__)

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

# broker key -> the topic key it is the default for
_TOPIC_KEY_OF: dict[str, str] = {bk: tk for tk, syns in BROKER_SYNONYMS.items()
                                 for bk, _scale in syns}
_TOPIC_KEY_OF.update({"min.insync.replicas": "min.insync.replicas",
                      "unclean.leader.election.enable": "unclean.leader.election.enable"})
# As in Kafka, only each topic key's preferred broker synonym is dynamic (log.retention.ms,
# log.roll.ms; not log.retention.hours or log.flush.scheduler.interval.ms).
APPLIED_KEYS = frozenset({syns[0][0] for syns in BROKER_SYNONYMS.values()}
                         | {"min.insync.replicas", "unclean.leader.election.enable"})


# ---- Kafka's other dynamic broker keys: checked and stored, not acted on here --------------
_TYPE_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}


def _integer(minimum: int | None = None) -> Any:
    def check(key: str, value: str) -> None:
        key_type = key_type_of(key)  # the key's own ConfigDef type: INT keys hold 32 bits
        kind = key_type.type if key_type is not None and key_type.type in _TYPE_BITS \
            else "LONG"
        bound = 1 << (_TYPE_BITS[kind] - 1)
        try:
            n = int(value)
        except ValueError:
            n = bound  # not a number at all: refused as one out of range is
        if not -bound <= n < bound:
            raise ConfigError(f"Invalid value {value} for configuration {key}: Not a number "
                              f"of type {kind}")
        if minimum is not None and n < minimum:
            raise ConfigError(f"Invalid value {value} for configuration {key}: Value must "
                              f"be at least {minimum}")
    return check


def _double(key: str, value: str) -> None:
    try:
        float(value)
    except ValueError:
        raise ConfigError(f"Invalid value {value} for configuration {key}: Not a number of "
                          "type DOUBLE") from None


def _boolean(key: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"Invalid value {value} for configuration {key}: Expected value "
                          "to be either true or false")


def _text(key: str, value: str) -> None:
    """Any string (class names, lists, JAAS text, file paths...)."""


def _version(key: str, value: str) -> None:
    try:
        message_format_version(value)
    except ValueError as e:
        raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None


def _topic_key(topic_key: str) -> Any:
    def check(key: str, value: str) -> None:
        TOPIC_CONFIGS[topic_key].validator(key, value)
    return check


# The keystore/truststore keys (SslConfigs.RECONFIGURABLE_CONFIGS): per listener only.
SECURITY_KEYS: dict[str, Any] = {k: _text for k in (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates")}
# DynamicListenerConfig.ReconfigurableConfigs: per broker, also with a listener prefix.
LISTENER_KEYS: dict[str, Any] = {
    **{k: _text for k in (
        "listeners", "advertised.listeners", "listener.security.protocol.map",
        "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
        "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
        "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config", "sasl.enabled.mechanisms", "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd", "sasl.kerberos.principal.to.local.rules")},
    **SECURITY_KEYS,
    "sasl.kerberos.ticket.renew.window.factor": _double,
    "sasl.kerberos.ticket.renew.jitter": _double,
    "sasl.kerberos.min.time.before.relogin": _integer(0),
    "sasl.login.refresh.window.factor": _double,
    "sasl.login.refresh.window.jitter": _double,
    "sasl.login.refresh.min.period.seconds": _integer(0),
    "sasl.login.refresh.buffer.seconds": _integer(0),
    "max.connections": _integer(0),
    "max.connection.creation.rate": _integer(0),
    "num.network.threads": _integer(1),
}
# Listener keys that may also be set cluster-wide (ClusterLevelListenerConfigs).
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate",
                                          "num.network.threads"})
PER_BROKER_KEYS = frozenset(set(LISTENER_KEYS) - _CLUSTER_LEVEL_LISTENER_KEYS)

STORED_ONLY_KEYS: dict[str, Any] = {
    **LISTENER_KEYS,
    # the log cleaner (LogCleaner.ReconfigurableConfigs)
    "log.cleaner.threads": _integer(0), "log.cleaner.dedupe.buffer.size": _integer(0),
    "log.cleaner.io.buffer.load.factor": _double, "log.cleaner.io.buffer.size": _integer(0),
    "log.cleaner.io.max.bytes.per.second": _double, "log.cleaner.backoff.ms": _integer(0),
    # thread pools (DynamicThreadPool)
    "num.io.threads": _integer(1), "num.replica.fetchers": _integer(1),
    "num.recovery.threads.per.data.dir": _integer(1), "background.threads": _integer(1),
    # the socket server's connection limits
    "max.connections.per.ip": _integer(0), "max.connections.per.ip.overrides": _text,
    "metric.reporters": _text,
    "producer.id.expiration.ms": _integer(1),
    "transaction.partition.verification.enable": _boolean,
    # replication quotas (DynamicConfig.Broker): acted on (READ_LIVE_KEYS)
    "leader.replication.throttled.rate": _integer(0),
    "follower.replication.throttled.rate": _integer(0),
    "replica.alter.log.dirs.io.max.bytes.per.second": _integer(0),
    # topic-config defaults whose topic key this broker stores but does not act on
    "log.message.format.version": _version,
    "log.message.downconversion.enable": _boolean,
    "log.message.timestamp.before.max.ms": _topic_key("message.timestamp.before.max.ms"),
    "log.message.timestamp.after.max.ms": _topic_key("message.timestamp.after.max.ms"),
    "log.local.retention.ms": _topic_key("local.retention.ms"),
    "log.local.retention.bytes": _topic_key("local.retention.bytes"),
    "compression.gzip.level": _topic_key("compression.gzip.level"),
    "compression.lz4.level": _topic_key("compression.lz4.level"),
    "compression.zstd.level": _topic_key("compression.zstd.level"),
}
STORED_ONLY_KEYS = {k: v for k, v in STORED_ONLY_KEYS.items() if k not in APPLIED_KEYS}

# Every key AlterConfigs may set on a broker resource (listener-prefixed ones aside: see
# is_dynamic); the handler describes all others as read-only.
DYNAMIC_KEYS = APPLIED_KEYS | frozenset(STORED_ONLY_KEYS)

_LISTENER_PREFIX = "listener.name."


def listener_base(key: str) -> str | None:
    """`ssl.keystore.location` of `listener.name.<listener>.ssl.keystore.location`, and of
    `listener.name.<listener>.<mechanism>.sasl.jaas.config` the `sasl.jaas.config`; None
    for a key without the prefix."""
    if not key.startswith(_LISTENER_PREFIX):
        return None
    rest = key[len(_LISTENER_PREFIX):].partition(".")[2]
    if rest in LISTENER_KEYS:
        return rest
    mechanism_key = rest.partition(".")[2]  # <mechanism>.<key>, e.g. plain.sasl.jaas.config
    return mechanism_key if mechanism_key in LISTENER_KEYS else rest


def is_dynamic(key: str) -> bool:
    """May AlterConfigs set `key` on a broker resource (in some layer)?"""
    base = listener_base(key)
    if base is not None:
        return base in LISTENER_KEYS
    return key in DYNAMIC_KEYS


# Validated with the stored-only keys, but acted on: read from the live broker props
# (kafkactl/broker/replication_quota.py, kafkactl/broker/txn_verification.py), or given to
# the running parts by DynamicBrokerConfig's reconfigurables on each change (the connection
# limits and creation rates: kafkactl/broker/connection_quotas.py); also with a listener
# prefix
READ_LIVE_KEYS = frozenset({"leader.replication.throttled.rate",
                                    "follower.replication.throttled.rate",
                                    "transaction.partition.verification.enable",
                                    "max.connections", "max.connection.creation.rate"})


# The keys of a TLS listener's SSL context (kafkactl.broker.security.ssl_context), plain or
# per listener: applied at start and, for new connections, at run time.
TLS_KEYS = CONTEXT_KEYS
# Security keys applied when the broker starts (its listeners' SASL, how it reaches the other
# brokers of its cluster), checked when they change.
AT_START_KEYS = frozenset({"sasl.enabled.mechanisms", "sasl.jaas.config",
                           "sasl.mechanism.inter.broker.protocol",
                           "ssl.endpoint.identification.algorithm"})


def _acted_on(base: str) -> bool:
    return base in READ_LIVE_KEYS or base in TLS_KEYS or base in AT_START_KEYS


def is_stored_only(key: str) -> bool:
    """A dynamic key this broker keeps but does not act on."""
    base = listener_base(key)
    return (base in LISTENER_KEYS and not _acted_on(base)) if base is not None else \
        key in STORED_ONLY_KEYS and not _acted_on(key)


def is_applied_at_start(key: str) -> bool:
    """A dynamic key this broker acts on when it starts only (AT_START_KEYS)."""
    return (listener_base(key) or key) in AT_START_KEYS


STORED_ONLY_NOTE = ("Stored only: a dynamic Kafka broker config that kafkactl's broker keeps "
                    "(and describes) but does not act on.")
AT_START_NOTE = ("Applied when the broker starts: as Kafka, kafkactl's broker does not "
                 "reconfigure it at run time.")


def _check_dynamic(key: str, value: str, *, cluster_default: bool) -> None:
    """ConfigError, in Kafka's words, for a key that cannot be set dynamically there or a
    value it cannot take."""
    base = listener_base(key)
    if base is not None:
        if base not in LISTENER_KEYS:
            raise ConfigError(f"Cannot update these configs dynamically: {key} (not a "
                              "listener config Kafka updates dynamically)")
        if cluster_default and base not in _CLUSTER_LEVEL_LISTENER_KEYS:
            raise ConfigError("Cannot update these configs at default cluster level, broker "
                              f"id must be specified: {key}")
        LISTENER_KEYS[base](key, value)
        return
    if key in SECURITY_KEYS:
        raise ConfigError("These security configs can be dynamically updated only "
                          f"per-listener using the listener prefix: {key} (set "
                          f"listener.name.<listener>.{key})")
    if key in APPLIED_KEYS:
        TOPIC_CONFIGS[_TOPIC_KEY_OF[key]].validator(key, value)
        return
    if key not in STORED_ONLY_KEYS:
        hint = ""
        dynamic_synonym = synonyms_of(key)[0]
        if dynamic_synonym != key and dynamic_synonym in APPLIED_KEYS:
            hint = f"; its dynamic synonym is {dynamic_synonym}"
        raise ConfigError(f"Cannot update these configs dynamically: {key} (it is "
                          f"read-only; set it in server.properties{hint})")
    if cluster_default and key in PER_BROKER_KEYS:
        raise ConfigError("Cannot update these configs at default cluster level, broker id "
                          f"must be specified: {key}")
    STORED_ONLY_KEYS[key](key, value)


# Kafka's ServerTopicConfigSynonyms (3.x): each topic config -> the broker key that sets its
# default, the first of its broker synonyms (broker_config_synonyms has the others). A
# topic config not listed has no broker synonym (the throttled replicas, remote storage).
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "preallocate": "log.preallocate",
    "message.format.version": "log.message.format.version",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys that set the same thing, the
# finest unit first.
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
# Listener keys given as listener.name.<listener>.<mechanism>.<key> (ListenerMechanismConfigs)
_LISTENER_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                            "sasl.login.class", "sasl.server.callback.handler.class",
                            "connections.max.reauth.ms")


def broker_config_synonyms(name: str) -> list[str]:
    """Kafka's brokerConfigSynonyms(name, matchListenerOverride = true): `name` and the
    broker keys that stand in for it, highest precedence first (log.retention.ms,
    log.retention.minutes, log.retention.hours; log.flush.interval.ms, then
    log.flush.scheduler.interval.ms; a listener-prefixed key, then its base key)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return [name, "log.flush.scheduler.interval.ms"]
    if name.startswith(_LISTENER_PREFIX):
        rest = name[len(_LISTENER_PREFIX):].partition(".")[2]
        if rest:
            mechanism_key = next((k for k in _LISTENER_MECHANISM_KEYS if rest.endswith(k)),
                                 None)
            return [name, mechanism_key or rest]
    return [name]


def synonyms_of(key: str) -> list[str]:
    """The broker keys that set the same thing, in Kafka's order (finest unit first)."""
    topic_key = _TOPIC_KEY_OF.get(key)
    if topic_key is None or topic_key not in BROKER_SYNONYMS:
        return [key]
    return [bk for bk, _scale in BROKER_SYNONYMS[topic_key]]


class DynamicBrokerConfig:
    """The two dynamic layers over the static `config` (whose explicitly set keys are
    `explicit_keys`); changes reach the logs hosted in `partitions`."""

    def __init__(self, config: BrokerConfig, explicit_keys: set[str], path: Path,
                 partitions: PartitionStore) -> None:
        self.config = config
        self.explicit_keys = explicit_keys
        self.partitions = partitions
        self.path = path
        self.static: dict[str, str] = dict(config.props)
        self.default: dict[str, str] = {}
        self.broker: dict[str, str] = {}
        self.file = DynamicConfigFile(path, self.broker_id, self.static, config.is_sensitive)
        # the running parts told of each change, with the broker's new live configs
        # (Kafka's Reconfigurables): the socket server's connection creation rates, the TLS
        # listeners' SSL contexts
        self.reconfigurables: list[Callable[[Mapping[str, str]], None]] = []
        # what checks a change first (Kafka's validateReconfiguration), with the live
        # configs and the ones the change would make live: ConfigError refuses it
        self.validators: list[Callable[[Mapping[str, str], Mapping[str, str]], None]] = []
        partitions.dynamic_config = self  # found there by the ZooKeeper config listener

    @property
    def broker_id(self) -> str:
        return str(self.config.broker_id)

    # ---- persistence -----------------------------------------------------------------------
    def load(self) -> None:
        """Read the stored layers (passwords decrypted) and make them live; ConfigError when
        the file is damaged or a password cannot be decrypted."""
        stored = self.file.read()
        self.default, self.broker = stored.default, stored.broker
        self.apply()
        if self.default or self.broker:
            log.info("dynamic broker configs from %s: %s", self.path,
                     loggable({**self.default, **self.broker}, self.config.is_sensitive))
        if stored.reencode:
            self._persist()
            log.info("dynamic password configs %s are now stored encrypted with the current "
                     "password.encoder.secret", ", ".join(sorted(stored.reencode)))
        if stored.clear:
            log.warning("dynamic password configs %s are stored in clear text in %s (written "
                        "by an older kafkactl): set password.encoder.secret in "
                        "server.properties and the broker stores them encrypted",
                        ", ".join(sorted(stored.clear)), self.path)

    def _persist(self) -> None:
        self.file.write(self.default, self.broker)

    # ---- queries ---------------------------------------------------------------------------
    def layer(self, resource_name: str) -> dict[str, str]:
        if resource_name == "":
            return self.default
        if resource_name == self.broker_id:
            return self.broker
        raise ConfigError(f"this is broker {self.broker_id}, not {resource_name!r}")

    def effective(self, default: Mapping[str, str] | None = None,
                  broker: Mapping[str, str] | None = None) -> dict[str, str]:
        props = dict(self.static)
        props.update(self.default if default is None else default)
        props.update(self.broker if broker is None else broker)
        return props

    def synonyms(self, key: str) -> list[dict[str, Any]]:
        """DescribeConfigs synonyms of broker key `key`, as Kafka's ConfigHelper
        configSynonyms lists them: layer by layer (this broker's dynamic configs, the
        cluster default's, server.properties, the defaults), in each the keys of
        broker_config_synonyms(key) that it sets, then all that come before the first
        entry for `key` itself dropped (Kafka's dropWhile: with log.retention.ms unset
        anywhere, log.retention.ms has no synonyms, not even log.retention.hours')."""
        names = broker_config_synonyms(key)
        out: list[dict[str, Any]] = []
        for layer, source in ((self.broker, DYNAMIC_BROKER_CONFIG),
                              (self.default, DYNAMIC_DEFAULT_BROKER_CONFIG)):
            out += [{"name": n, "value": layer[n], "source": source} for n in names
                    if n in layer]
        out += [{"name": n, "value": self.static[n], "source": STATIC_BROKER_CONFIG}
                for n in names if n in self.explicit_keys and n in self.static
                and not (self.static[n] == "" and n in NULL_DEFAULT_KEYS)]
        for n in names:
            default = kafka_default(n)
            if default is not None:
                out.append({"name": n, "value": default, "source": DEFAULT_CONFIG})
        while out and out[0]["name"] != key:
            out.pop(0)
        return out

    # ---- changes ---------------------------------------------------------------------------
    def validate(self, resource_name: str, new_layer: Mapping[str, str]) -> None:
        """Raise ConfigError naming the first key that cannot be set dynamically or whose
        value is invalid (the resulting effective config must still build)."""
        current = self.layer(resource_name)
        for key, value in new_layer.items():
            if current.get(key) == value:
                continue
            _check_dynamic(key, value, cluster_default=resource_name == "")
            if self.config.is_sensitive(key):
                self.file.require_encoder(key)
        layers = ({"default": dict(new_layer)} if resource_name == ""
                  else {"broker": dict(new_layer)})
        new_effective = self.effective(**layers)
        LogConfig.from_properties(log_default_props(new_effective))
        for check in self.validators:
            check(self.config.props, new_effective)

    def update(self, resource_name: str, new_layer: Mapping[str, str]) -> None:
        self.validate(resource_name, new_layer)
        layer = self.layer(resource_name)
        old = dict(layer)
        layer.clear()
        layer.update(new_layer)
        self._persist()
        self.apply()
        where = "cluster default" if resource_name == "" else f"broker {resource_name}"
        log.info("dynamic broker configs (%s) are now %s", where,
                 loggable(new_layer, self.config.is_sensitive) or "empty")
        changed = sorted(k for k, v in new_layer.items() if old.get(k) != v)
        stored = [k for k in changed if is_stored_only(k)]
        if stored:
            log.info("stored, not acted on by this broker (it has no such setting, or reads "
                     "it only at start-up): %s", ", ".join(stored))
        at_start = [k for k in changed if is_applied_at_start(k)]
        if at_start:
            log.info("stored, applied when the broker starts again: %s", ", ".join(at_start))

    def describe_note(self, key: str) -> str | None:
        """What a client should know about a dynamic key set here, for DescribeConfigs'
        documentation field: None for a key the broker acts on."""
        if is_applied_at_start(key):
            return AT_START_NOTE
        return STORED_ONLY_NOTE if is_stored_only(key) else None

    def apply(self) -> None:
        """Make the effective config live: the broker's props and every log's defaults."""
        effective = self.effective()
        self.config.props.clear()
        self.config.props.update(effective)
        defaults = LogConfig.from_properties(log_default_props(effective))
        self.partitions.update_default_config(defaults)
        for reconfigure in self.reconfigurables:
            reconfigure(self.config.props)
