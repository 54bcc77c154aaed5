"""`kafkactl configs alter --delete-config` refuses a key that is not set on the entity, as
kafka-configs does (ConfigCommand: "Invalid config(s): k1,k2", nothing changed): a topic's
override, a broker's own dynamic config, a cluster-wide broker default. It used to say
"Completed updating config" and exit 0. `topics alter --delete-config` refuses the same
keys with the same sentence (it said "Updated config", exit 0)."""

from __future__ import annotations

import subprocess

from tests import zygote
from tests.conftest import BrokerProcess


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def dynamic_configs(b: BrokerProcess, *entity: str) -> list[str]:
    r = kafkactl("configs", "describe", "-b", b.bootstrap, *entity)
    assert r.returncode == 0, r.stderr
    return [line.split()[0] for line in r.stdout.splitlines()[1:]]


def test_deleting_a_topic_config_that_is_not_set_is_refused(
        module_broker: BrokerProcess) -> None:
    b = module_broker
    r = kafkactl("topics", "create", "-b", b.bootstrap, "-t", "seg",
                 "--config", "retention.ms=100000")
    assert r.returncode == 0, r.stderr
    for keys, invalid in (("nonexist.key", "nonexist.key"),
                          # a known key at its default is not set on the topic either
                          ("segment.bytes", "segment.bytes"),
                          # one bad key: nothing deleted, the good one stays
                          ("retention.ms,nonexist.key,other.key", "nonexist.key,other.key")):
        r = kafkactl("configs", "alter", "-b", b.bootstrap, "--topic", "seg",
                     "--delete-config", keys)
        assert r.returncode == 1, (keys, r.stdout, r.stderr)
        assert r.stderr.strip() == f"error: Invalid config(s): {invalid}", r.stderr
        assert "Completed" not in r.stdout
        assert dynamic_configs(b, "--topic", "seg") == ["retention.ms=100000"]
    r = kafkactl("configs", "alter", "-b", b.bootstrap, "--entity-type", "topics",
                 "--entity-name", "seg", "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for topic seg."
    assert dynamic_configs(b, "--topic", "seg") == []
    # a topic that does not exist is named as before (the check asks the broker first)
    r = kafkactl("configs", "alter", "-b", b.bootstrap, "--topic", "nosuch",
                 "--delete-config", "retention.ms")
    assert r.returncode == 1
    assert r.stderr.startswith(
        "error: cannot update the config for topic nosuch: UNKNOWN_TOPIC_OR_PARTITION"), \
        r.stderr


def test_deleting_a_broker_config_that_is_not_set_is_refused(broker: BrokerProcess) -> None:
    # log.retention.ms set cluster-wide is not set on broker 0 itself, and the reverse
    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--broker-defaults",
                 "--add-config", "log.retention.ms=86400000")
    assert r.returncode == 0, r.stderr
    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--broker", "0",
                 "--add-config", "log.cleaner.threads=2")
    assert r.returncode == 0, r.stderr
    for entity, keys, invalid in (
            (["--broker", "0"], "log.retention.ms", "log.retention.ms"),
            (["--broker-defaults"], "log.cleaner.threads", "log.cleaner.threads"),
            (["--entity-type", "brokers", "--entity-default"], "nonexist.key,log.retention.ms",
             "nonexist.key")):
        r = kafkactl("configs", "alter", "-b", broker.bootstrap, *entity,
                     "--delete-config", keys)
        assert r.returncode == 1, (entity, r.stdout, r.stderr)
        assert r.stderr.strip() == f"error: Invalid config(s): {invalid}", r.stderr
        assert "Completed" not in r.stdout
    assert dynamic_configs(broker, "--broker-defaults") == ["log.retention.ms=86400000"]
    assert dynamic_configs(broker, "--broker", "0") == ["log.cleaner.threads=2"]
    for entity, key in ((["--broker", "0"], "log.cleaner.threads"),
                        (["--broker-defaults"], "log.retention.ms")):
        r = kafkactl("configs", "alter", "-b", broker.bootstrap, *entity,
                     "--delete-config", key)
        assert r.returncode == 0, r.stderr
        assert dynamic_configs(broker, *entity) == []


def test_topics_alter_refuses_deleting_a_config_that_is_not_set(
        module_broker: BrokerProcess) -> None:
    b = module_broker
    r = kafkactl("topics", "create", "-b", b.bootstrap, "-t", "seg-topics",
                 "--config", "retention.ms=100000")
    assert r.returncode == 0, r.stderr
    for args, invalid in ((["--delete-config", "segment.ms"], "segment.ms"),
                          (["--delete-config", "retention.ms", "--delete-config", "nonexist.key"],
                           "nonexist.key"),
                          # refused before anything changes: no partition added either
                          (["--partitions", "3", "--delete-config", "segment.ms"], "segment.ms")):
        r = kafkactl("topics", "alter", "-b", b.bootstrap, "-t", "seg-topics", *args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stderr.strip() == f"error: Invalid config(s): {invalid}", r.stderr
        assert r.stdout == "", r.stdout
        assert dynamic_configs(b, "--topic", "seg-topics") == ["retention.ms=100000"]
    r = kafkactl("topics", "describe", "-b", b.bootstrap, "-t", "seg-topics")
    assert "PartitionCount: 1\t" in r.stdout, r.stdout
    r = kafkactl("topics", "alter", "-b", b.bootstrap, "-t", "seg-topics",
                 "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Updated config of topic seg-topics."
    assert dynamic_configs(b, "--topic", "seg-topics") == []
