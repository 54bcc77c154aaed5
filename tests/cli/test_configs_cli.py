"""`kafkactl configs` against a real broker: the running broker's id, clear errors for an
empty entity name, and Kafka's dynamic broker keys (issue 30, item 10): the ones the broker
acts on, the ones it stores only (said so), and the ones Kafka too refuses."""

from __future__ import annotations

import subprocess

from tests import zygote
from tests.conftest import BrokerProcess


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def alter_broker(b: BrokerProcess, target: list[str], config: str
                 ) -> subprocess.CompletedProcess[str]:
    return kafkactl("configs", "alter", "-b", b.bootstrap, "--entity-type", "brokers",
                    *target, "--add-config", config)


def test_describe_all_shows_the_running_broker_id(module_broker: BrokerProcess) -> None:
    r = kafkactl("configs", "describe", "-b", module_broker.bootstrap, "--entity-type",
                 "brokers", "--entity-name", "0", "--all")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("broker.id="))
    assert line.strip().startswith("broker.id=0 "), line


def test_an_empty_entity_name_says_what_is_missing(module_broker: BrokerProcess) -> None:
    for args, message in (
            (["--entity-type", "topics", "--entity-name", ""],
             "error: --entity-name is empty: give a topic name"),
            (["--entity-type", "brokers", "--entity-name", " "],
             "error: --entity-name is empty: give a broker id (or --entity-default"),
            (["--topic", ""], "error: --topic is empty: give a topic name")):
        r = kafkactl("configs", "alter", "-b", module_broker.bootstrap, *args,
                     "--add-config", "retention.ms=1000")
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(message), r.stderr
        assert "alter :" not in r.stderr


def test_kafkas_dynamic_broker_keys_are_taken(broker: BrokerProcess) -> None:
    """Refused as read-only before; now stored (per broker), described, kept across a
    restart, and the command says the broker does not act on them."""
    r = alter_broker(broker, ["--entity-name", "0"],
                     "sasl.kerberos.min.time.before.relogin=60000,num.io.threads=4,"
                     "log.cleaner.threads=2,log.message.format.version=0.10.0.0,"
                     "listener.name.plaintext.max.connections=100")
    assert r.returncode == 0, r.stderr
    assert "Completed updating config for broker 0." in r.stdout
    # (listener.name.plaintext.max.connections is acted on)
    assert "note: a kafkactl broker stores " \
           "log.cleaner.threads, log.message.format.version, num.io.threads, " \
           "sasl.kerberos.min.time.before.relogin but does not act on it" in r.stderr, r.stderr
    broker.restart()
    r = kafkactl("configs", "describe", "-b", broker.bootstrap, "--broker", "0")
    assert r.returncode == 0, r.stderr
    for kv in ("sasl.kerberos.min.time.before.relogin=60000", "num.io.threads=4",
               "log.cleaner.threads=2", "log.message.format.version=0.10.0.0",
               "listener.name.plaintext.max.connections=100"):
        assert f"  {kv} " in r.stdout, (kv, r.stdout)


def test_the_readme_example_and_what_kafka_too_refuses(broker: BrokerProcess) -> None:
    # log.retention.ms is the dynamic one, applied to the broker's topic default
    r = alter_broker(broker, ["--entity-name", "0"], "log.retention.ms=86400000")
    assert r.returncode == 0, r.stderr
    assert "note:" not in r.stderr
    # .hours is read-only in Kafka too: the error names the dynamic synonym
    r = alter_broker(broker, ["--entity-name", "0"], "log.retention.hours=24")
    assert r.returncode == 1
    assert r.stderr.startswith("error: cannot update the config for broker 0: INVALID_CONFIG: "
                               "Cannot update these configs dynamically: log.retention.hours")
    assert "its dynamic synonym is log.retention.ms" in r.stderr
    # per-broker keys are not cluster-wide defaults
    r = alter_broker(broker, ["--entity-default"], "sasl.kerberos.min.time.before.relogin=1")
    assert r.returncode == 1
    assert ("error: cannot update the default config for brokers in the cluster: "
            "INVALID_CONFIG: Cannot update these configs at default cluster level, broker id "
            "must be specified: sasl.kerberos.min.time.before.relogin") in r.stderr, r.stderr
    # keystores only per listener
    r = alter_broker(broker, ["--entity-name", "0"], "ssl.keystore.location=/k.jks")
    assert r.returncode == 1 and "only per-listener using the listener prefix" in r.stderr
    # a bad value is named
    r = alter_broker(broker, ["--entity-name", "0"], "num.io.threads=many")
    assert r.returncode == 1 and "Invalid value many for configuration num.io.threads" \
        in r.stderr, r.stderr
    r = alter_broker(broker, ["--entity-name", "0"], "log.message.format.version=0.7")
    assert r.returncode == 1 and "Version 0.7 is not a valid version" in r.stderr, r.stderr
