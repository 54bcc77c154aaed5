"""Broker configuration: Kafka's server.properties keys, a properties-file parser and overrides.

Precedence (lowest first): built-in defaults, `--config FILE`, the friendly CLI flags
(`--listen`, `--data-dir`, `--broker-id`), then every `--override key=value` in order.
The defaults are standalone-friendly: one broker on 127.0.0.1:9092 with its data in
./kafkactl-data (Kafka itself listens on all interfaces and uses /tmp/kafka-logs).

As Kafka's KafkaConfig does at start, `BrokerConfig.build` refuses a numeric or boolean
value of the wrong type or outside Kafka's range (BROKER_KEY_TYPES: `min.insync.replicas=0`,
`replica.lag.time.max.ms=foo`) with a ConfigError naming the key, the value and the rule,
and logs one warning per key it does not know ("supplied but isn't a known config"), naming
where it came from and the closest known key.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.broker.config_types import (
    BROKER_KEY_TYPES,
    BROKER_TEXT_KEYS,
    LISTENER_PREFIX,
    SECURITY_KEY_PREFIXES,
    SECURITY_KEYS,
    ConfigError,
    key_type_of,
)
from kafkactl.protocol.properties import parse_properties

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1

# key -> default (as text, the way server.properties spells it). A key that neither this
# table nor the known keys below (is_known_key) list is kept, with a warning at start, so
# that a full Kafka server.properties loads unchanged.
BROKER_DEFAULTS: dict[str, str] = {
    "broker.id": "-1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
    "log.dirs": "",
    "log.dir": "./kafkactl-data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.request.max.bytes": "104857600",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "connections.max.idle.ms": "600000",
    "connection.failed.authentication.delay.ms": "100",
    # client quotas (kafkactl.broker.quota_manager): rates over num samples of size seconds
    # HOST:PORT of the /metrics, /health and /ready listener (kafkactl.broker.metrics); "": off
    "metrics.listen": "",
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "log.segment.bytes": "1073741824",
    "log.roll.hours": "168",
    "log.roll.ms": "",
    "log.retention.hours": "168",
    "log.retention.minutes": "",
    "log.retention.ms": "",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.flush.interval.messages": str(LONG_MAX),
    "log.flush.interval.ms": "",
    "log.flush.scheduler.interval.ms": str(LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.cleanup.policy": "delete",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.difference.max.ms": str(LONG_MAX),
    "log.segment.delete.delay.ms": "60000",
    "compression.type": "producer",
    "num.recovery.threads.per.data.dir": "1",
    "zookeeper.connect": "",
    "zookeeper.connection.timeout.ms": "18000",
    "zookeeper.session.timeout.ms": "18000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "fetch.max.bytes": "57671680",
    "replica.fetch.backoff.ms": "1000",
    "replica.lag.time.max.ms": "30000",
    # incremental fetch sessions (KIP-227, kafkactl.broker.fetch_session): 0 slots, none
    "max.incremental.fetch.session.cache.slots": "1000",
    "min.incremental.fetch.session.eviction.ms": "120000",
    # replication throttling (kafkactl.broker.replication_quota): rates over num samples
    # of size seconds, as Kafka measures them
    "replication.quota.window.num": "11",
    "replication.quota.window.size.seconds": "1",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.segment.bytes": "104857600",
    "producer.id.expiration.ms": "86400000",  # KIP-854
    "producer.id.expiration.check.interval.ms": "600000",
    "offsets.retention.minutes": "10080",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.partition.verification.enable": "true",  # KIP-890 on partition leaders
    "group.initial.rebalance.delay.ms": "3000",
    "unclean.leader.election.enable": "false",
    "cluster.id": "",
}

# ---- network limits (kafkactl.broker.network, kafkactl.broker.connection_quotas) -----------
def default_max_connections() -> int:
    """`max.connections` unless set: Kafka's default is unbounded; here it is what the open
    files limit (RLIMIT_NOFILE, soft) leaves for the log's segment and index files: half of
    it, or all but 4096 descriptors when that is more."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= 2**31:
        return 2**31 - 1
    return max(soft // 2, soft - 4096, 1)


BROKER_DEFAULTS.update({
    # Bytes of all in-flight requests together (incomplete ones and ones waiting for their
    # turn); over it the broker stops reading from sockets until requests complete. Kafka's
    # default is -1 (unbounded; -1 or 0 still means that here); ours is 100 MiB.
    "queued.max.request.bytes": str(100 * 1024 * 1024),
    # Not a Kafka key: a request whose bytes are not all in this long after its first byte
    # closes its connection (Kafka clients give up on a request after request.timeout.ms,
    # 30000, anyway).
    "socket.request.read.timeout.ms": "30000",
    "max.connections": str(default_max_connections()),
    "max.connections.per.ip": str(2**31 - 1),
    "max.connections.per.ip.overrides": "",
    # new connections a second on all listeners but the inter-broker one (KIP-612; also
    # listener.name.<listener>.max.connection.creation.rate): Kafka's default, unbounded
    "max.connection.creation.rate": str(2**31 - 1),
    # the log cleaner runs (Kafka's default); false: compacted topics are not cleaned
    "log.cleaner.enable": "true",
})


# Kafka's defaults (KafkaConfig) of the broker keys that set topic configs' defaults and
# that BROKER_DEFAULTS leaves out (each is its topic config's default, kafkactl.log.config):
# DescribeConfigs shows them with these values, source DEFAULT_CONFIG. None: Kafka's
# default is null (no value).
TOPIC_DEFAULT_KEYS: dict[str, str | None] = {
    "log.roll.jitter.ms": None, "log.roll.jitter.hours": "0",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": str(LONG_MAX),
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.preallocate": "false",
    "log.message.format.version": "3.0-IV1",
    "log.message.timestamp.before.max.ms": str(LONG_MAX),
    "log.message.timestamp.after.max.ms": str(LONG_MAX),
    "log.message.downconversion.enable": "true",
    "log.local.retention.ms": "-2", "log.local.retention.bytes": "-2",
    "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.zstd.level": "3",
}
# The keys whose Kafka default is null: BROKER_DEFAULTS spells them "" (not set), and
# DescribeConfigs shows them as null, without a DEFAULT_CONFIG synonym, until one is set.
NULL_DEFAULT_KEYS = frozenset({
    "advertised.listeners", "log.dirs", "zookeeper.connect", "log.roll.ms",
    "log.retention.minutes", "log.retention.ms", "log.flush.interval.ms",
    *(k for k, v in TOPIC_DEFAULT_KEYS.items() if v is None)})


def kafka_default(key: str) -> str | None:
    """The default of a broker key as DescribeConfigs shows it (its DEFAULT_CONFIG value):
    None when Kafka's is null or the key has no default here."""
    if key in NULL_DEFAULT_KEYS:
        return None
    if key in TOPIC_DEFAULT_KEYS:
        return TOPIC_DEFAULT_KEYS[key]
    return BROKER_DEFAULTS.get(key)


# Every broker key this broker knows by name (is_known_key adds the families). The broker
# defaults of topic configs (kafkactl.log.config.BROKER_SYNONYMS) and the dynamic keys
# (kafkactl.broker.dynamic_config) are among them: tests/broker/test_config_keys.py checks.
KNOWN_KEYS = (frozenset(BROKER_DEFAULTS) | frozenset(BROKER_KEY_TYPES) | BROKER_TEXT_KEYS
              | SECURITY_KEYS | frozenset(TOPIC_DEFAULT_KEYS))


def is_known_key(key: str) -> bool:
    """A key this broker reads or keeps: a known name, any `listener.name.<listener>.` key
    (each listener's own settings) or one of Kafka's SASL key families."""
    return (key in KNOWN_KEYS or key.startswith(LISTENER_PREFIX)
            or key.startswith(SECURITY_KEY_PREFIXES))


def closest_known_key(key: str) -> str | None:
    """The known key `key` is most likely a misspelling of, if one is close."""
    near = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.8)
    return near[0] if near else None


def unknown_key_warning(key: str, where: str | None = None) -> str:
    """What to say about a key this broker does not know, given in `where` (a file or
    --override): Kafka's "supplied but isn't a known config", with the known key it may be
    a misspelling of, or, for a topic config, the broker's default for it."""
    from kafkactl.log.config import BROKER_SYNONYMS
    from kafkactl.log.config_def import TOPIC_CONFIGS

    said = f"the configuration '{key}'" + (f" (from {where})" if where else "")
    if key in TOPIC_CONFIGS:
        synonyms = BROKER_SYNONYMS.get(key) or [("log." + key, 1)]
        default_key = synonyms[0][0]
        if default_key in KNOWN_KEYS:
            return (f"{said} is a topic config, not a broker config, and is ignored, as "
                    f"Kafka ignores it: the broker's default for it is '{default_key}' (a "
                    "topic's own: kafkactl topics create|alter --config)")
        return (f"{said} is a topic config, not a broker config, and is ignored, as Kafka "
                "ignores it: set it per topic (kafkactl topics create|alter --config)")
    near = closest_known_key(key)
    return (f"{said} was supplied but isn't a known broker config: kafkactl keeps it and "
            "does not use it" + (f"; did you mean '{near}'?" if near else ""))


# Broker keys of the topics' defaults whose value is one of a few strings (Kafka's
# ValidString / ValidList): an empty value is refused, not taken as "not set".
LOG_CHOICE_KEYS = frozenset({"log.cleanup.policy", "log.message.timestamp.type",
                             "compression.type"})


def log_default_props(props: Mapping[str, str]) -> dict[str, str]:
    """The keys a broker's log defaults are built from: the set ones, without a topic
    config's own name (`retention.ms`, not `log.retention.ms`), which Kafka ignores in
    server.properties (unknown_key_warning says so at start)."""
    from kafkactl.log.config_def import TOPIC_CONFIGS

    return {k: v for k, v in props.items()
            if v != "" and (k not in TOPIC_CONFIGS or is_known_key(k))}


def warn_unknown_keys(keys: Iterable[str], origin: Mapping[str, str] | None = None) -> None:
    """One warning per key this broker does not know (unknown_key_warning), naming where
    it came from (`origin`: key -> the file, or --override)."""
    for key in keys:
        if not is_known_key(key):
            log.warning("%s", unknown_key_warning(key, (origin or {}).get(key)))


def check_value(key: str, value: str) -> None:
    """ConfigError naming the key, the value and the rule when a numeric or boolean key's
    value is not of Kafka's type or outside its range. An empty value is "not set" for a
    key without a default (Kafka's null: log.retention.ms, ...)."""
    key_type = key_type_of(key)
    if key_type is None:
        return
    if not value.strip() and not BROKER_DEFAULTS.get(key):
        return
    key_type.check(key, value)


def parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} is not of the form key=value")
    return key.strip(), value.strip()


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Endpoint]:
    """`PLAINTEXT://host:port,...` -> endpoints. An empty host means all interfaces."""
    endpoints: list[Endpoint] = []
    for item in filter(None, (s.strip() for s in value.split(","))):
        name, sep, hostport = item.partition("://")
        if not sep:
            raise ConfigError(f"listener {item!r} must look like PLAINTEXT://host:port")
        host, colon, port = hostport.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"listener {item!r} has no valid port")
        endpoints.append(Endpoint(name.upper(), host.strip("[]"), int(port)))
    if not endpoints:
        raise ConfigError("listeners is empty: give at least one PLAINTEXT://host:port")
    return endpoints


def check_log_dirs(given: Mapping[str, str]) -> None:
    """Kafka's "at least one log directory": log.dirs (or, without it, log.dir) set to
    nothing but blanks and commas is refused, not replaced by the embedded default."""
    for key in ("log.dirs", "log.dir"):
        if key in given:
            if not any(d.strip() for d in given[key].split(",")):
                raise ConfigError(f"{key}={given[key]!r} names no directory: at least one "
                                  "log directory must be defined via log.dirs or log.dir")
            return


def check_broker_id(broker_id: int) -> None:
    """A broker.id someone set: 0 or more. Kafka's -1 asks for a generated id (from
    ZooKeeper's /brokers/seqid), which kafkactl does not do: left unset, the id is 0."""
    if broker_id == -1:
        raise ConfigError("broker.id=-1 asks for a generated broker id, which kafkactl does "
                          "not do: set broker.id (--broker-id) to 0 or more, or leave it "
                          "unset for 0")
    if broker_id < 0:
        raise ConfigError(f"broker.id={broker_id} is negative: a broker id is 0 or more "
                          "(--broker-id N)")


@dataclass
class BrokerConfig:
    """All broker properties as text plus typed accessors for the ones the broker uses."""

    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        config_file: Path | None = None,
        flags: dict[str, str] | None = None,
        overrides: list[str] | None = None,
    ) -> BrokerConfig:
        given: dict[str, str] = {}  # what the file, the flags and the overrides set
        origin: dict[str, str] = {}  # key -> where its value came from
        if config_file is not None:
            try:
                text = config_file.read_text()
            except OSError as e:
                raise ConfigError(f"cannot read config file {config_file}: {e.strerror}") from e
            from_file = parse_properties(text)
            given.update(from_file)
            origin.update(dict.fromkeys(from_file, str(config_file)))
        given.update(flags or {})
        for item in overrides or []:
            k, v = parse_override(item)
            given[k] = v
            origin[k] = "--override"
        warn_unknown_keys(given, origin)
        check_log_dirs(given)
        cfg = cls({**BROKER_DEFAULTS, **given})
        cfg.validate()
        if "broker.id" in given:
            check_broker_id(cfg.get_int("broker.id"))
        # The id this broker runs as: Kafka's default -1 ("pick one") is 0 here, and
        # DescribeConfigs must show the id that answers, not -1.
        cfg.props["broker.id"] = str(cfg.broker_id)
        return cfg

    def get(self, key: str) -> str:
        return self.props.get(key, BROKER_DEFAULTS.get(key, ""))

    def described_value(self, key: str) -> str | None:
        """`key`'s value as DescribeConfigs shows it: Kafka's null for a key without a
        value (log.retention.ms unset), the default of a key that is not set."""
        value = self.props.get(key)
        if value is None or (value == "" and key in NULL_DEFAULT_KEYS):
            return kafka_default(key)
        return value

    def get_int(self, key: str) -> int:
        value = self.get(key)
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}={value!r} is not an integer") from None

    def get_int_or(self, key: str, default: int) -> int:
        """`key` as an int, or `default` when it is unset, empty or not an integer (for
        keys that fall back quietly rather than stop the broker)."""
        raw = self.props.get(key)
        if not raw:
            return default
        try:
            return int(raw)
        except ValueError:
            return default

    def get_bool(self, key: str) -> bool:
        value = self.get(key).strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key}={value!r} must be true or false")
        return value == "true"

    def validate(self) -> None:
        """ConfigError for the first value Kafka would refuse at start: a numeric or boolean
        key's type or range (BROKER_KEY_TYPES), or the listeners."""
        for key, value in self.props.items():
            check_value(key, value)
        self.listeners  # noqa: B018 - parses and raises ConfigError on a bad value
        from kafkactl.log.config import LogConfig

        # the log keys' own values: log.cleanup.policy=bogus, compression.type=brotli, and
        # an empty one where the default is not (Kafka's lists of valid strings hold no "")
        emptied = {k: v for k, v in self.props.items()
                   if k in LOG_CHOICE_KEYS and not v.strip() and BROKER_DEFAULTS.get(k)}
        try:
            LogConfig.from_properties({**log_default_props(self.props), **emptied})
        except ValueError as e:
            raise ConfigError(str(e)) from None

    # ---- typed views -------------------------------------------------------------------
    @property
    def broker_id(self) -> int:
        bid = self.get_int("broker.id")
        return 0 if bid < 0 else bid

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners(self.get("listeners"))

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        adv = self.get("advertised.listeners")
        eps = parse_listeners(adv) if adv else self.listeners
        return [Endpoint(e.listener, e.host or "127.0.0.1", e.port)
                if e.host in ("", "0.0.0.0", "::") else e for e in eps]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir")
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    def is_sensitive(self, key: str) -> bool:
        return is_sensitive(key)


# Every broker key Kafka types PASSWORD (DescribeConfigs returns them as null with
# is_sensitive=true), also when prefixed by `listener.name.<listener>.[<mechanism>.]`.
PASSWORD_KEYS = frozenset({
    "sasl.jaas.config",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.truststore.password",
    "password.encoder.secret", "password.encoder.old.secret",
    "delegation.token.master.key", "delegation.token.secret.key",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
})


def is_sensitive(key: str) -> bool:
    """True for a PASSWORD-typed key (or one whose name says it holds a secret)."""
    base = key
    if key.startswith("listener.name."):
        # listener.name.<listener>.<key> or listener.name.<listener>.<mechanism>.<key>
        parts = key.split(".", 3)
        base = parts[3] if len(parts) == 4 else ""
        if base not in PASSWORD_KEYS and "." in base:
            mech_rest = base.split(".", 1)[1]
            if mech_rest in PASSWORD_KEYS:
                return True
    lowered = base.lower()
    return (base in PASSWORD_KEYS or "password" in lowered or "secret" in lowered
            or lowered.endswith(("jaas.config", ".private.key", "keystore.key")))
