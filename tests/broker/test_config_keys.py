"""`kafkactl serve`'s server.properties keys, checked as Kafka's KafkaConfig checks them.

A key the broker does not know (`nosuch.key`, the typo `log.retention.hourz`) is kept with
one warning naming it, where it came from and the closest known key (it used to pass in
silence, though the README promised a warning); the keys the README documents, the
listener-prefixed ones, Kafka's TLS/SASL keys and the broker defaults of topic configs
stay silent. A numeric or boolean value of the wrong type or outside Kafka's range
(`min.insync.replicas=0`, `group.max.size=0`, `replica.lag.time.max.ms=foo`) stops the
broker with one line naming the key, the value and the rule, exit 2 (it used to start).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkactl.broker import config as broker_config
from kafkactl.broker.config import BROKER_DEFAULTS, BrokerConfig, ConfigError
from tests import zygote
from tests.conftest import free_port

CONFIG_LOGGER = "kafkactl.broker.config"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == CONFIG_LOGGER and r.levelno == logging.WARNING]


# ---- unknown keys ------------------------------------------------------------------------
def test_unknown_keys_warn_once_each_naming_the_file_and_the_closest_key(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    props = tmp_path / "server.properties"
    props.write_text("broker.id=0\nnosuch.key=5\nlog.retention.hourz=5\n")
    with caplog.at_level(logging.WARNING, CONFIG_LOGGER):
        cfg = BrokerConfig.build(config_file=props, overrides=["ssl.client.auht=required"])
    said = _warnings(caplog)
    assert len(said) == 3, said
    nosuch, hourz, auht = said
    assert "'nosuch.key'" in nosuch and f"(from {props})" in nosuch
    assert "isn't a known broker config" in nosuch and "did you mean" not in nosuch
    assert "'log.retention.hourz'" in hourz and f"(from {props})" in hourz
    assert "did you mean 'log.retention.hours'?" in hourz
    assert "'ssl.client.auht' (from --override)" in auht
    assert "did you mean 'ssl.client.auth'?" in auht
    # kept, as the README says
    assert cfg.props["nosuch.key"] == "5" and cfg.props["log.retention.hourz"] == "5"


def test_an_override_names_itself_as_the_origin(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, CONFIG_LOGGER):
        BrokerConfig.build(overrides=["nosuch.key=5", "nosuch.key=6"])
    said = _warnings(caplog)
    assert len(said) == 1 and "'nosuch.key' (from --override)" in said[0], said


def test_a_topic_config_given_to_the_broker_names_the_brokers_key(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, CONFIG_LOGGER):
        BrokerConfig.build(overrides=["retention.ms=1000"])
    said = _warnings(caplog)
    assert len(said) == 1 and "is a topic config" in said[0], said
    assert "'log.retention.ms'" in said[0]


# Every key of README's Configuration table and Security section, Kafka's own sample
# server.properties (ZooKeeper mode), listener-prefixed keys, TLS/SASL keys and the broker
# defaults of topic configs.
SILENT = {
    "broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "/tmp/d",
    "log.dir": "/tmp/d", "num.partitions": "1", "auto.create.topics.enable": "true",
    "delete.topic.enable": "true", "message.max.bytes": "1048588",
    "log.segment.bytes": "1073741824", "log.roll.ms": "1000", "log.roll.hours": "168",
    "log.retention.ms": "1000", "log.retention.minutes": "10", "log.retention.hours": "168",
    "log.retention.bytes": "-1", "log.retention.check.interval.ms": "300000",
    "log.cleanup.policy": "delete", "log.cleaner.backoff.ms": "15000",
    "log.flush.interval.messages": "1000", "log.flush.interval.ms": "1000",
    "log.index.interval.bytes": "4096", "log.index.size.max.bytes": "10485760",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.difference.max.ms": "1000", "log.segment.delete.delay.ms": "60000",
    "compression.type": "producer", "socket.request.max.bytes": "104857600",
    "queued.max.request.bytes": "104857600", "socket.request.read.timeout.ms": "30000",
    "connections.max.idle.ms": "600000", "connection.failed.authentication.delay.ms": "100",
    "max.connections": "1000", "max.connections.per.ip": "100",
    "max.connections.per.ip.overrides": "127.0.0.1:200", "producer.id.expiration.ms": "86400000",
    "zookeeper.connect": "", "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "18000", "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3", "controlled.shutdown.retry.backoff.ms": "5000",
    "unclean.leader.election.enable": "false", "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1", "min.insync.replicas": "1",
    "replica.lag.time.max.ms": "30000", "replica.fetch.wait.max.ms": "500",
    "replica.fetch.max.bytes": "1048576", "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000", "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10", "offsets.topic.num.partitions": "50",
    "offsets.retention.minutes": "10080", "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096", "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "6000", "group.max.session.timeout.ms": "1800000",
    "group.max.size": "100", "metrics.listen": "127.0.0.1:9308",
    # Security
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
    "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
    "ssl.truststore.location": "/ca.pem", "ssl.client.auth": "none",
    "ssl.keystore.key": "x", "ssl.keystore.certificate.chain": "x",
    "ssl.principal.mapping.rules": "DEFAULT", "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN", "connections.max.reauth.ms": "0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
    "inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT",
    "listener.name.sasl_ssl.plain.sasl.jaas.config": "x",
    "listener.name.sasl_ssl.ssl.keystore.location": "/k.pem",
    "listener.name.plaintext.max.connections": "10",
    "sasl.oauthbearer.jwks.endpoint.url": "https://x", "sasl.login.connect.timeout.ms": "1",
    # Kafka's config/server.properties
    "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400", "num.recovery.threads.per.data.dir": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    # other topic defaults and transaction keys the broker reads
    "log.roll.jitter.hours": "0", "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.delete.retention.ms": "1", "log.preallocate": "false",
    "transaction.max.timeout.ms": "900000", "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.partition.verification.enable": "true",
}


def test_documented_and_free_form_keys_are_silent(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in SILENT.items()))
    with caplog.at_level(logging.WARNING, CONFIG_LOGGER):
        cfg = BrokerConfig.build(config_file=props)
    assert _warnings(caplog) == []
    assert cfg.get("group.max.size") == "100"


def test_every_dynamic_and_topic_default_key_is_known() -> None:
    """The broker keys AlterConfigs accepts and the broker synonyms of topic configs are
    known statically too (config.py lists them without importing those modules)."""
    from kafkactl.broker.dynamic_config import DYNAMIC_KEYS, LISTENER_KEYS
    from kafkactl.log.config import BROKER_SYNONYMS

    synonyms = {bk for syns in BROKER_SYNONYMS.values() for bk, _scale in syns}
    unknown = sorted(k for k in {*DYNAMIC_KEYS, *LISTENER_KEYS, *synonyms}
                     if not broker_config.is_known_key(k))
    assert unknown == []


# ---- values ------------------------------------------------------------------------------
@pytest.mark.parametrize(("override", "said"), [
    ("min.insync.replicas=0", "min.insync.replicas=0 is out of range: it must be at least 1"),
    ("group.max.size=0", "group.max.size=0 is out of range: it must be at least 1"),
    ("offsets.topic.num.partitions=0", "offsets.topic.num.partitions=0 is out of range: it "
                                       "must be at least 1"),
    ("offsets.topic.replication.factor=0", "must be at least 1"),
    ("transaction.state.log.num.partitions=0", "must be at least 1"),
    ("default.replication.factor=0", "must be at least 1"),
    ("num.partitions=0", "num.partitions=0 is out of range: it must be at least 1"),
    ("replica.lag.time.max.ms=foo", "replica.lag.time.max.ms='foo' is not an integer (LONG)"),
    ("zookeeper.session.timeout.ms=abc",
     "zookeeper.session.timeout.ms='abc' is not an integer (INT)"),
    ("num.partitions=3000000000", "num.partitions=3000000000 is out of range: INT values are "
                                  "between -2147483648 and 2147483647"),
    ("offsets.topic.replication.factor=40000", "SHORT values are between -32768 and 32767"),
    ("auto.leader.rebalance.enable=yes", "auto.leader.rebalance.enable='yes' must be true or "
                                         "false"),
    ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio=1.5 is out of "
                                            "range: it must be between 0 and 1"),
    ("sasl.kerberos.ticket.renew.jitter=x", "'x' is not a number (DOUBLE)"),
    ("compression.gzip.level=0", "it must be between 1 and 9 or -1"),
    ("listener.name.plaintext.max.connections=-1",
     "listener.name.plaintext.max.connections=-1 is out of range: it must be at least 0"),
    ("num.partitions=", "num.partitions='' is not an integer"),
    ("num.io.threads=1_0", "num.io.threads='1_0' is not an integer"),
    # the log keys' values (they stopped the broker with exit 1, after it began to start)
    ("log.cleanup.policy=bogus", "Invalid value bogus for configuration log.cleanup.policy: "
                                 "String must be one of: compact, delete"),
    ("compression.type=brotli", "Invalid value brotli for configuration compression.type"),
    ("log.message.timestamp.type=Foo", "configuration log.message.timestamp.type: String "
                                       "must be one of: CreateTime, LogAppendTime"),
    # no log dir at all (log.dirs= used to fall back to ./kafkactl-data)
    ("log.dirs=", "log.dirs='' names no directory: at least one log directory must be "
                  "defined via log.dirs or log.dir"),
    ("log.dirs= , ", "log.dirs=',' names no directory"),
    ("log.dir=", "log.dir='' names no directory"),
    # an empty value of a key with a list of valid strings (it was taken as the default)
    ("compression.type=", "Invalid value  for configuration compression.type: String must "
                          "be one of"),
    ("log.message.timestamp.type=", "configuration log.message.timestamp.type: String must "
                                    "be one of: CreateTime, LogAppendTime"),
    ("log.cleanup.policy=", "Invalid value  for configuration log.cleanup.policy: Empty list"),
])
def test_a_value_kafka_refuses_is_refused(override: str, said: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.build(overrides=[override])
    assert said in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("override", [
    "min.insync.replicas=1", "group.max.size=1", "compression.gzip.level=-1",
    "log.retention.ms=", "log.retention.ms=-1", "queued.max.request.bytes=-1",
    "replica.lag.time.max.ms= 500 ", "auto.create.topics.enable=FALSE",
    "group.initial.rebalance.delay.ms=0", "log.cleaner.min.cleanable.ratio=0.01",
    "log.segment.bytes=14",
])
def test_values_in_range_are_taken(override: str) -> None:
    key, _, value = override.partition("=")
    assert BrokerConfig.build(overrides=[override]).props[key] == value.strip()


def test_the_defaults_are_valid() -> None:
    BrokerConfig(dict(BROKER_DEFAULTS)).validate()
    assert BrokerConfig.build().props["min.insync.replicas"] == "1"


# Across every type's bounds (the dynamic path took 2147483648 threads for an INT key it
# only stores, which the next start refused).
PROBES = ["abc", "1.5", "true", "-131073", "-3", "-2", "-1", "0", "1", "7", "8", "9", "13",
          "14", "17", "18", "22", "100", "32767", "32768", "2147483647", "2147483648",
          "-2147483649", "9223372036854775807", "9223372036854775808"]


def _refused(check: Callable[[str, str], object], key: str, value: str) -> bool:
    try:
        check(key, value)
    except ValueError:
        return True
    return False


def test_static_and_dynamic_checks_agree() -> None:
    """A value AlterConfigs accepts for a broker key (or the topic config it is the default
    of) is accepted at start too, and the other way round: the same ranges."""
    from kafkactl.broker.dynamic_config import DYNAMIC_KEYS, _check_dynamic

    def dynamic(key: str, value: str) -> None:
        _check_dynamic(key, value, cluster_default=False)

    types = broker_config.BROKER_KEY_TYPES
    typed = sorted(k for k in DYNAMIC_KEYS if k in types)
    assert len(typed) > 40
    differ = [(key, value) for key in typed for value in PROBES
              if _refused(types[key].check, key, value) != _refused(dynamic, key, value)]
    assert differ == []


# ---- the command line (one `kafkactl serve` that stops before starting a broker) -----------
def test_serve_warns_of_an_unknown_key_and_refuses_a_bad_value(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hourz=5\n")
    r = zygote.run(["serve", "-c", str(props), "-d", str(data), "-l",
                    f"127.0.0.1:{free_port()}", "-o", "nosuch.key=5",
                    "-o", "min.insync.replicas=0"], text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 3, r.stderr
    assert "WARNING" in lines[0] and "'log.retention.hourz'" in lines[0]
    assert "did you mean 'log.retention.hours'?" in lines[0]
    assert "WARNING" in lines[1] and "'nosuch.key' (from --override)" in lines[1]
    assert lines[2] == ("error: min.insync.replicas=0 is out of range: it must be at "
                        "least 1")
    assert "Traceback" not in r.stderr
    assert not data.exists()  # refused before anything was made


@pytest.mark.parametrize(("override", "said"), [
    ("log.cleanup.policy=bogus", "error: Invalid value bogus for configuration "
                                 "log.cleanup.policy: String must be one of: compact, delete"),
    ("log.dirs=", "error: log.dirs='' names no directory: at least one log directory must "
                  "be defined via log.dirs or log.dir"),
])
def test_serve_refuses_a_bad_log_value_like_a_bad_number(tmp_path: Path, override: str,
                                                          said: str) -> None:
    """One line and exit 2, as for a number out of range (an enum was exit 1, after the
    broker had begun to start; an empty log.dirs started on ./kafkactl-data)."""
    r = zygote.run(["serve", "-l", f"127.0.0.1:{free_port()}", "-o", override],
                   text=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert [line for line in r.stderr.splitlines() if line.strip()] == [said]
    assert list(tmp_path.iterdir()) == []  # no ./kafkactl-data made


def test_a_topic_config_given_to_the_broker_is_ignored_as_kafka_ignores_it() -> None:
    """`retention.ms=1000` in server.properties is not the topics' default (Kafka's broker
    reads only `log.retention.ms`); a key that is both (compression.type) still counts."""
    from kafkactl.broker.config import log_default_props
    from kafkactl.log.config import LogConfig

    cfg = BrokerConfig.build(overrides=["retention.ms=1000", "log.segment.bytes=5000000",
                                        "compression.type=zstd", "min.insync.replicas=2"])
    defaults = LogConfig.from_properties(log_default_props(cfg.props))
    assert defaults.retention_ms == LogConfig().retention_ms
    assert (defaults.segment_bytes, defaults.compression_type,
            defaults.min_insync_replicas) == (5000000, "zstd", 2)
