"""`kafkactl top` from the Kafka protocol with each broker's CPU: the protocol has no CPU
figure, so `--metrics-port` / `--broker-metrics` name the brokers' metrics endpoints
(a real broker with `--metrics`), and the snapshot gets each broker's CPU %, memory and
connections; an endpoint that does not answer is said, not fatal; without either option
the brokers' entries stay as they were."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=120)


@pytest.fixture
def metered(broker_factory: Any) -> tuple[BrokerProcess, int]:
    port = free_port()
    return broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"]), port


def once(*args: str) -> dict[str, Any]:
    r = kafkactl("top", "--once", "--json", "--interval", "0.3", *args)
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_protocol_source_with_each_brokers_cpu(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    url = f"http://127.0.0.1:{port}/metrics"
    for option in (["--metrics-port", str(port)], ["--broker-metrics", f"0=127.0.0.1:{port}"],
                   ["--broker-metrics", f"0={url}"]):
        doc = once("-b", b.bootstrap, *option)
        assert doc["source"] == "protocol"
        [broker] = doc["brokers"]
        assert broker["id"] == 0 and broker["up"] is True and broker["metrics"] == url
        assert isinstance(broker["cpu_percent"], float) and broker["cpu_percent"] >= 0
        assert broker["rss_bytes"] > 0 and broker["connections"] >= 1  # top's own
    r = kafkactl("top", "--once", "--interval", "0.1", "-b", b.bootstrap, "--metrics-port",
                 str(port))
    assert r.returncode == 0 and "cpu %" in r.stdout and "rss MiB" in r.stdout, r.stderr
    # without the option: the protocol alone, no CPU column
    doc = once("-b", b.bootstrap)
    assert "cpu_percent" not in doc["brokers"][0]
    r = kafkactl("top", "--once", "--interval", "0.1", "-b", b.bootstrap)
    assert r.returncode == 0 and "cpu %" not in r.stdout


def test_an_endpoint_that_does_not_answer_and_bad_options(
        metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    doc = once("-b", b.bootstrap, "--metrics-port", str(free_port()))
    [broker] = doc["brokers"]
    assert broker["up"] is True and broker["cpu_percent"] is None
    assert broker["metrics_error"]
    for args, hint in ((["--broker-metrics", "x=127.0.0.1:1"], "--broker-metrics"),
                       (["--broker-metrics", "0"], "--broker-metrics"),
                       (["--broker-metrics", "0=ftp://h/m"], "--broker-metrics"),
                       (["--metrics", f"127.0.0.1:{port}", "--metrics-port", str(port)],
                        "--metrics")):
        r = kafkactl("top", "--once", "-b", b.bootstrap, *args)
        assert r.returncode == 2 and hint in r.stderr, (args, r.stderr)
