"""-b/--bootstrap-server (and $KAFKACTL_BOOTSTRAP) must be host:port, as Kafka's clients
require: `-b 24092` is a usage error naming the form, not a host "24092" whose failure
suggests checking SSL/SASL. The real CLI; no broker is reached."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests import zygote

USAGE = {
    "24092": "'24092' has no host: expected host:port, e.g. 127.0.0.1:24092",
    "localhost": "'localhost' has no port: expected host:port, e.g. localhost:9092",
    "localhost:abc": "'localhost:abc': expected host:port, the port a number from 1 to 65535",
    "h:1,h:70000": "'h:70000': expected host:port, the port a number from 1 to 65535",
    "::1": "'::1': write an IPv6 address as [address]:port",
    ",": "no broker given: expected host:port[,host:port]",
}


def kafkactl(*args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KAFKACTL_BOOTSTRAP"}
    return zygote.run(list(args), text=True, timeout=60, env={**environ, **(env or {})})


@pytest.mark.parametrize("servers", list(USAGE))
def test_a_bootstrap_entry_without_host_port_is_a_usage_error(servers: str) -> None:
    r = kafkactl("topics", "list", "-b", servers)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: Invalid value for '--bootstrap-server' / '-b': {USAGE[servers]}"), r.stderr
    assert "SSL" not in r.stderr


def test_the_environment_is_checked_too_when_it_is_used() -> None:
    r = kafkactl("consume", "-t", "t", "-e", env={"KAFKACTL_BOOTSTRAP": "24092"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"error: KAFKACTL_BOOTSTRAP=24092: {USAGE['24092']}"
    # -b given: the environment is not used, nor checked
    r = kafkactl("consume", "-t", "t", "-e", "-b", "127.0.0.1:1", "--timeout-ms", "1",
                 env={"KAFKACTL_BOOTSTRAP": "24092"})
    assert r.returncode == 1 and "no broker answered at 127.0.0.1:1" in r.stderr, r.stderr


@pytest.mark.parametrize("servers", ["[::1]:1", "PLAINTEXT://127.0.0.1:1", ":1",
                                     "127.0.0.1:1,"])
def test_the_forms_the_client_takes_are_accepted(servers: str) -> None:
    r = kafkactl("topics", "list", "-b", servers)
    assert r.returncode == 1 and "no broker answered" in r.stderr, r.stderr


def test_a_far_off_x_name_suggests_nothing() -> None:
    r = kafkactl("produce", "-t", "t", "-X", "foo.bar=1", "-b", "127.0.0.1:1")
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: -X foo.bar: not a producer property kafkactl knows "
                                "(--help lists them)")
