"""`kafkactl configs --entity-type broker-loggers` (kafka-configs' broker-loggers, KIP-412)
against a real broker: its loggers and levels described, a level set and reset at
runtime (and acted on: the broker logs at DEBUG), unknown loggers refused with
kafka-configs' message; a value that is not set prints as `null`, as kafka-configs."""

from __future__ import annotations

import subprocess

from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def _levels(b: BrokerProcess) -> dict[str, str]:
    r = kafkactl("configs", "describe", "-b", b.bootstrap, "--entity-type",
                 "broker-loggers", "--entity-name", "0")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 0 are:", r.stdout
    out = {}
    for line in lines[1:]:
        name, _, rest = line.strip().partition("=")
        out[name] = rest.split(" ", 1)[0]
    return out


def test_broker_logger_levels_are_described_set_and_reset(broker: BrokerProcess) -> None:
    before = _levels(broker)
    assert before["root"] == "INFO" and "kafkactl.broker.network" in before, before
    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--entity-type",
                 "broker-loggers", "--entity-name", "0", "--add-config",
                 "kafkactl.broker.network=DEBUG")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for broker-logger 0.", r.stdout
    assert _levels(broker)["kafkactl.broker.network"] == "DEBUG"
    kafkactl("topics", "list", "-b", broker.bootstrap)  # a connection, logged at DEBUG
    wait_until(lambda: "connection" in broker.log() and " DEBUG " in broker.log(), 10,
               "a DEBUG line of the network layer")
    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--entity-type",
                 "broker-loggers", "--entity-name", "0", "--delete-config",
                 "kafkactl.broker.network")
    assert r.returncode == 0, r.stderr
    assert _levels(broker)["kafkactl.broker.network"] == before["kafkactl.broker.network"]

    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--entity-type",
                 "broker-loggers", "--entity-name", "0", "--add-config", "no.such=DEBUG")
    assert r.returncode == 1 and "Invalid broker logger(s): no.such" in r.stderr, r.stderr
    r = kafkactl("configs", "alter", "-b", broker.bootstrap, "--entity-type",
                 "broker-loggers", "--entity-name", "0", "--add-config",
                 "kafkactl.broker.network=LOUD")
    assert r.returncode == 1 and "INVALID_CONFIG" in r.stderr, r.stderr


def test_an_unset_value_prints_null(broker: BrokerProcess) -> None:
    r = kafkactl("configs", "describe", "-b", broker.bootstrap, "--entity-type", "brokers",
                 "--entity-name", "0", "--all")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines()
                if x.strip().startswith("log.retention.ms="))
    assert line.strip().startswith("log.retention.ms=null sensitive=false"), line
    assert "=None" not in r.stdout
