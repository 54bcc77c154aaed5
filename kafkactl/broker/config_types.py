"""The types and valid values of the broker's numeric and boolean keys (Kafka's ConfigDef:
INT, SHORT, LONG, DOUBLE, BOOLEAN with their validators) and the names of the other keys it
knows: what kafkactl.broker.config checks a server.properties against."""

from __future__ import annotations

import re
from dataclasses import dataclass


class ConfigError(ValueError):
    """A configuration file or value that cannot be used (message names the key)."""


# ---- the types and valid values of the numeric and boolean keys -----------------------------
_INTEGER = re.compile(r"[+-]?[0-9]+")
_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}


@dataclass(frozen=True)
class KeyType:
    """Kafka's ConfigDef type of a broker key (INT, SHORT, LONG, DOUBLE or BOOLEAN) and its
    validator: at least `low` and at most `high` when set, or one of `also`."""

    type: str
    low: float | None = None
    high: float | None = None
    also: tuple[int, ...] = ()

    def rule(self) -> str:
        if self.low is not None and self.high is not None:
            text = f"between {_num(self.low)} and {_num(self.high)}"
        elif self.low is not None:
            text = f"at least {_num(self.low)}"
        else:
            text = f"at most {_num(self.high or 0)}"
        return text + "".join(f" or {a}" for a in self.also)

    def check(self, key: str, value: str) -> None:
        """ConfigError naming `key`, `value` and the rule when `value` is not one of ours."""
        text = value.strip()
        if self.type == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise ConfigError(f"{key}={value!r} must be true or false")
            return
        number: float
        if self.type == "DOUBLE":
            try:
                number = float(text)
            except ValueError:
                raise ConfigError(f"{key}={value!r} is not a number (DOUBLE)") from None
        else:
            if not _INTEGER.fullmatch(text):
                raise ConfigError(f"{key}={value!r} is not an integer ({self.type})")
            number = int(text)
            bound = 1 << (_BITS[self.type] - 1)
            if not -bound <= number < bound:
                raise ConfigError(f"{key}={text} is out of range: {self.type} values are "
                                  f"between {-bound} and {bound - 1}")
        if number in self.also:
            return
        if ((self.low is not None and number < self.low)
                or (self.high is not None and number > self.high)):
            raise ConfigError(f"{key}={text} is out of range: it must be {self.rule()}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def INT(low: int | None = None, high: int | None = None,  # noqa: N802 - Kafka's type names
        also: tuple[int, ...] = ()) -> KeyType:
    return KeyType("INT", low, high, also)


def SHORT(low: int | None = None) -> KeyType:  # noqa: N802
    return KeyType("SHORT", low)


def LONG(low: int | None = None) -> KeyType:  # noqa: N802
    return KeyType("LONG", low)


def DOUBLE(low: float | None = None, high: float | None = None) -> KeyType:  # noqa: N802
    return KeyType("DOUBLE", low, high)


BOOLEAN = KeyType("BOOLEAN")

# Every numeric or boolean key this broker reads, or keeps for AlterConfigs and
# DescribeConfigs, with Kafka's type and validator (KafkaConfig's ConfigDef; for the
# defaults of topic configs, the topic config's range, as LogConfig checks it: a value that
# the dynamic path, kafkactl.broker.dynamic_config, refuses is refused here too). Keys for
# which Kafka has no validator are checked for their type only. Also checked with a
# `listener.name.<listener>.` prefix.
BROKER_KEY_TYPES: dict[str, KeyType] = {
    # general, network
    "broker.id": INT(),  # and check_broker_id when it is set
    "num.network.threads": INT(1), "num.io.threads": INT(1), "background.threads": INT(1),
    "num.replica.fetchers": INT(1), "num.recovery.threads.per.data.dir": INT(1),
    "request.timeout.ms": INT(),
    "queued.max.request.bytes": LONG(),
    "socket.send.buffer.bytes": INT(), "socket.receive.buffer.bytes": INT(),
    "socket.request.max.bytes": INT(1),
    "socket.request.read.timeout.ms": INT(1),  # not a Kafka key
    "connections.max.idle.ms": LONG(1),  # Kafka: any LONG; the broker needs one > 0
    "connection.failed.authentication.delay.ms": INT(0),
    "max.connections": INT(0), "max.connections.per.ip": INT(0),
    "max.connection.creation.rate": INT(0),
    # security
    "connections.max.reauth.ms": LONG(),
    "sasl.server.max.receive.size": INT(),
    "sasl.kerberos.ticket.renew.window.factor": DOUBLE(),
    "sasl.kerberos.ticket.renew.jitter": DOUBLE(),
    "sasl.kerberos.min.time.before.relogin": LONG(0),
    "sasl.login.refresh.window.factor": DOUBLE(), "sasl.login.refresh.window.jitter": DOUBLE(),
    "sasl.login.refresh.min.period.seconds": SHORT(0),
    "sasl.login.refresh.buffer.seconds": SHORT(0),
    "allow.everyone.if.no.acl.found": BOOLEAN,
    # topics and their log defaults
    "num.partitions": INT(1),
    "default.replication.factor": INT(1),  # Kafka: no validator; CreateTopics needs >= 1
    "min.insync.replicas": INT(1),
    "auto.create.topics.enable": BOOLEAN, "delete.topic.enable": BOOLEAN,
    "message.max.bytes": INT(0),
    "log.segment.bytes": INT(14),
    "log.roll.ms": LONG(1), "log.roll.hours": INT(1),
    "log.roll.jitter.ms": LONG(0), "log.roll.jitter.hours": INT(0),
    "log.retention.ms": LONG(-1), "log.retention.minutes": INT(-1),
    "log.retention.hours": INT(-1), "log.retention.bytes": LONG(-1),
    "log.retention.check.interval.ms": LONG(1),
    "log.index.size.max.bytes": INT(8), "log.index.interval.bytes": INT(0),
    "log.flush.interval.messages": LONG(1), "log.flush.interval.ms": LONG(0),
    "log.flush.scheduler.interval.ms": LONG(0),
    "log.flush.offset.checkpoint.interval.ms": INT(0),
    "log.segment.delete.delay.ms": LONG(0),
    "log.preallocate": BOOLEAN,
    "log.message.timestamp.difference.max.ms": LONG(0),
    "log.message.timestamp.before.max.ms": LONG(0),
    "log.message.timestamp.after.max.ms": LONG(0),
    "log.message.downconversion.enable": BOOLEAN,
    "log.local.retention.ms": LONG(-2), "log.local.retention.bytes": LONG(-2),
    "compression.gzip.level": INT(1, 9, also=(-1,)), "compression.lz4.level": INT(1, 17),
    "compression.zstd.level": INT(-131072, 22),
    "unclean.leader.election.enable": BOOLEAN,
    # the log cleaner
    "log.cleaner.enable": BOOLEAN,
    "log.cleaner.backoff.ms": LONG(0), "log.cleaner.threads": INT(0),
    "log.cleaner.dedupe.buffer.size": LONG(0), "log.cleaner.io.buffer.size": INT(0),
    "log.cleaner.io.buffer.load.factor": DOUBLE(),
    "log.cleaner.io.max.bytes.per.second": DOUBLE(),
    "log.cleaner.min.cleanable.ratio": DOUBLE(0, 1),
    "log.cleaner.delete.retention.ms": LONG(0),
    "log.cleaner.min.compaction.lag.ms": LONG(0), "log.cleaner.max.compaction.lag.ms": LONG(1),
    # ZooKeeper, replication, the controller
    "zookeeper.session.timeout.ms": INT(), "zookeeper.connection.timeout.ms": INT(),
    "replica.lag.time.max.ms": LONG(),
    "replica.fetch.wait.max.ms": INT(), "replica.fetch.min.bytes": INT(),
    "replica.fetch.max.bytes": INT(0), "replica.fetch.response.max.bytes": INT(0),
    "fetch.max.bytes": INT(1024),
    "replica.fetch.backoff.ms": INT(0),
    "max.incremental.fetch.session.cache.slots": INT(0),
    "min.incremental.fetch.session.eviction.ms": INT(0),
    "auto.leader.rebalance.enable": BOOLEAN,
    "leader.imbalance.check.interval.seconds": LONG(1),
    "leader.imbalance.per.broker.percentage": INT(),
    "controlled.shutdown.enable": BOOLEAN, "controlled.shutdown.max.retries": INT(),
    "controlled.shutdown.retry.backoff.ms": LONG(),
    # quotas and replication throttling
    "quota.window.num": INT(1), "quota.window.size.seconds": INT(1),
    "replication.quota.window.num": INT(1), "replication.quota.window.size.seconds": INT(1),
    "leader.replication.throttled.rate": LONG(0), "follower.replication.throttled.rate": LONG(0),
    "replica.alter.log.dirs.io.max.bytes.per.second": LONG(0),
    # the group coordinator and __consumer_offsets
    "group.min.session.timeout.ms": INT(), "group.max.session.timeout.ms": INT(),
    "group.initial.rebalance.delay.ms": INT(), "group.max.size": INT(1),
    "offset.metadata.max.bytes": INT(),
    "offsets.topic.replication.factor": SHORT(1), "offsets.topic.num.partitions": INT(1),
    "offsets.topic.segment.bytes": INT(1), "offsets.retention.minutes": INT(1),
    "offsets.retention.check.interval.ms": LONG(1),
    # transactions, producer ids and __transaction_state
    "transactional.id.expiration.ms": INT(1), "transaction.max.timeout.ms": INT(1),
    "transaction.state.log.min.isr": INT(1),
    "transaction.state.log.replication.factor": SHORT(1),
    "transaction.state.log.num.partitions": INT(1),
    "transaction.state.log.segment.bytes": INT(1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": INT(1),
    "transaction.remove.expired.transaction.cleanup.interval.ms": INT(1),
    "transaction.partition.verification.enable": BOOLEAN,
    "producer.id.expiration.ms": INT(1), "producer.id.expiration.check.interval.ms": INT(1),
    # kafkactl.broker.password_encoder
    "password.encoder.iterations": INT(1024),
}


# ---- the keys this broker knows ----------------------------------------------------------
# Text-valued keys read or kept (for DescribeConfigs and AlterConfigs) besides
# BROKER_DEFAULTS'.
BROKER_TEXT_KEYS = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map", "log.dirs",
    "log.dir", "zookeeper.connect", "cluster.id", "metrics.listen",
    "max.connections.per.ip.overrides", "compression.type", "log.cleanup.policy",
    "log.message.timestamp.type", "log.message.format.version", "metric.reporters",
    "inter.broker.listener.name", "security.inter.broker.protocol", "authorizer.class.name",
    "super.users", "principal.builder.class",
    # the secrets of the dynamic password configs (kafkactl.broker.password_encoder); its
    # cipher, key factory and key length keys are Kafka's AES ones, not used here
    "password.encoder.secret", "password.encoder.old.secret",
})
# Kafka's broker TLS and SASL keys (SslConfigs, SaslConfigs, BrokerSecurityConfigs):
# kafkactl.broker.security reads them, or refuses the ones it cannot honour, naming them.
SECURITY_KEYS = frozenset({
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.engine.factory.class", "ssl.client.auth", "ssl.principal.mapping.rules",
    "ssl.principal.builder.class", "ssl.allow.dn.changes", "ssl.allow.san.changes",
    "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    "sasl.jaas.config", "sasl.enabled.mechanisms", "sasl.server.callback.handler.class",
    "sasl.client.callback.handler.class", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.principal.to.local.rules",
})
# Families of Kafka's SASL keys, known by their prefix (many, and more in each release).
SECURITY_KEY_PREFIXES = ("sasl.login.", "sasl.oauthbearer.")
LISTENER_PREFIX = "listener.name."


def key_type_of(key: str) -> KeyType | None:
    """The type of `key`, also of `listener.name.<listener>.[<mechanism>.]<key>`."""
    found = BROKER_KEY_TYPES.get(key)
    if found is not None or not key.startswith(LISTENER_PREFIX):
        return found
    rest = key[len(LISTENER_PREFIX):].partition(".")[2]
    return BROKER_KEY_TYPES.get(rest) or BROKER_KEY_TYPES.get(rest.partition(".")[2])
