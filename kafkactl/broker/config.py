"""Broker configuration: Kafka's server.properties keys, a properties-file parser and overrides.

Precedence (lowest first): built-in defaults, `--config FILE`, the friendly CLI flags
(`--listen`, `--data-dir`, `--broker-id`), then every `--override key=value` in order.
The defaults are standalone-friendly: one broker on 127.0.0.1:9092 with its data in
./kafkactl-data (Kafka itself listens on all interfaces and uses /tmp/kafka-logs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.protocol.properties import parse_properties

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1

# key -> default (as text, the way server.properties spells it). Keys not listed here are
# kept (a warning is logged) so that a full Kafka server.properties loads unchanged.
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
    "replica.fetch.backoff.ms": "1000",
    "replica.lag.time.max.ms": "30000",
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
})


class ConfigError(ValueError):
    """A configuration file or value that cannot be used (message names the key)."""



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
        if config_file is not None:
            try:
                text = config_file.read_text()
            except OSError as e:
                raise ConfigError(f"cannot read config file {config_file}: {e.strerror}") from e
            given.update(parse_properties(text))
        given.update(flags or {})
        for item in overrides or []:
            k, v = parse_override(item)
            given[k] = v
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
        for key in self.props:
            if key not in BROKER_DEFAULTS and not key.startswith(("log.", "listener.")):
                log.debug("config key %s is not used by this broker", key)
        for key in ("broker.id", "num.partitions", "message.max.bytes",
                    "socket.request.max.bytes", "connections.max.idle.ms",
                    "log.retention.check.interval.ms", "log.segment.bytes"):
            self.get_int(key)
        for key in ("auto.create.topics.enable", "delete.topic.enable"):
            self.get_bool(key)
        if self.get_int("num.partitions") < 1:
            raise ConfigError("num.partitions must be at least 1")
        self.listeners  # noqa: B018 - parses and raises ConfigError on a bad value

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
