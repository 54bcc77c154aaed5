"""Every kafkactl command that talks to a broker, over SASL_SSL + SCRAM-SHA-512 to a broker
with Kafka's ACL authorizer: it works with `-X` properties and with `--command-config FILE`,
and fails with one clear line (exit status 1, the Kafka error name, no traceback) when the
password is wrong or the topic, group or cluster is not authorized. One broker for the
module."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import (
    ACL_AUTHORIZER,
    PASSWORDS,
    SecureBroker,
    add_scram_users,
    start_secure,
)
from tests.broker.wire import Wire

AUTHORIZER = ACL_AUTHORIZER
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALL, DESCRIBE = 2, 8


def _acl(rtype: int, name: str, ptype: int, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": ptype,
            "principal": "User:alice", "host": "*", "operation": op, "permission_type": 3}


def _commit(w: Wire, group: str, topic: str) -> None:
    found = w.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
    assert found["error_code"] == 0, found  # as clients do first: it makes the topic
    r = w.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == 0, r


@pytest.fixture(scope="module")
def cli_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """alice may do everything on topic orders, on topics and groups named alice-*, and
    Describe the cluster; topic secret and group secret-g are not hers. The PLAINTEXT
    listener (ANONYMOUS) is a super user, for set-up."""
    from confluent_kafka import Producer

    sb = start_secure(tmp_path_factory.mktemp("cli"), certs, **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        for topic in ("orders", "secret"):
            assert w.create_topic(topic)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, "orders", LITERAL, ALL), _acl(TOPIC, "alice-", PREFIXED, ALL),
            _acl(GROUP, "alice-", PREFIXED, ALL), _acl(CLUSTER, "kafka-cluster", LITERAL,
                                                       DESCRIBE)]})
        assert [x["error_code"] for x in r["results"]] == [0] * 4, r
        _commit(w, "alice-g", "orders")
        _commit(w, "secret-g", "secret")
    p = Producer({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})
    for value in (b"one", b"two"):
        p.produce("orders", value)
    assert p.flush(15) == 0
    yield sb
    sb.broker.kill()


def _properties(sb: SecureBroker, password: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice", "sasl.password": password,
            "ssl.ca.location": str(sb.certs.ca)}


def _x(sb: SecureBroker, password: str = PASSWORDS["alice"]) -> list[str]:
    out = ["-b", sb.bootstrap("SASL_SSL")]
    for k, v in _properties(sb, password).items():
        out += ["-X", f"{k}={v}"]
    return out


def kafkactl(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return zygote.run(args, input=stdin, text=True, timeout=60)


@dataclass(frozen=True)
class Case:
    ok: list[str]
    shows: str  # on stdout when it works
    refused: list[str] | None = None  # the same command on something alice may not touch
    error: str = "TOPIC_AUTHORIZATION_FAILED"
    stdin: str | None = None


CASES = {
    "produce": Case(["produce", "-t", "orders", "-q"], "", ["produce", "-t", "secret", "-q"],
                    stdin="three\n"),
    "consume": Case(["consume", "-t", "orders", "--from-beginning", "-e", "-q"], "one\ntwo\n",
                    ["consume", "-t", "secret", "--from-beginning", "-e", "-q"]),
    "consume-group": Case(["consume", "-t", "orders", "-G", "alice-{how}", "-c", "1", "-q",
                           "--from-beginning"], "one\n",
                          ["consume", "-t", "orders", "-G", "secret-c", "-c", "1", "-q"],
                          "GROUP_AUTHORIZATION_FAILED"),
    "topics-list": Case(["topics", "list"], "orders"),
    "topics-describe": Case(["topics", "describe", "-t", "orders"], "PartitionCount: 1",
                            ["topics", "describe", "-t", "secret"]),
    "topics-create": Case(["topics", "create", "-t", "alice-new", "--if-not-exists"], "",
                          ["topics", "create", "-t", "bob-new"]),
    "topics-alter": Case(["topics", "alter", "-t", "alice-new", "--config",
                          "retention.ms=60000"], "Updated config",
                         ["topics", "alter", "-t", "secret", "--config", "retention.ms=1"]),
    "configs": Case(["configs", "describe", "--topic", "orders", "--all"], "retention.ms",
                    ["configs", "describe", "--topic", "secret"]),
    "offsets-show": Case(["offsets", "show", "-G", "alice-g"], "orders",
                         ["offsets", "show", "-G", "secret-g"], "GROUP_AUTHORIZATION_FAILED"),
    "offsets-reset": Case(["offsets", "reset", "-G", "alice-g", "--to-earliest"], "orders",
                          ["offsets", "reset", "-G", "secret-g", "--to-earliest"],
                          "GROUP_AUTHORIZATION_FAILED"),
    "rebalance": Case(["rebalance", "-G", "alice-g"], "group alice-g",
                      ["rebalance", "-G", "secret-g"], "GROUP_AUTHORIZATION_FAILED"),
    "cluster-describe": Case(["cluster", "describe"], "Cluster id"),
    "verify-replicas": Case(["cluster", "verify-replicas", "-t", "orders"], "orders-0",
                            ["cluster", "verify-replicas", "-t", "secret"]),
    "acls": Case(["acls", "list", "--principal", "User:alice"], "User:alice",
                 ["acls", "add", "--allow-principal", "User:alice", "--topic", "secret"],
                 "CLUSTER_AUTHORIZATION_FAILED"),
    "users": Case(["users", "list"], "alice",
                  ["users", "add", "mallory", "--password", "x"],
                  "CLUSTER_AUTHORIZATION_FAILED"),
}


def _assert_clear_failure(r: subprocess.CompletedProcess[str], error: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert error in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: "), r.stderr


@pytest.mark.parametrize("how", ["X", "command-config"])
@pytest.mark.parametrize("name", list(CASES))
def test_works_with_x_and_command_config(cli_broker: SecureBroker, tmp_path: Path,
                                         name: str, how: str) -> None:
    case = CASES[name]
    if how == "X":
        args = _x(cli_broker)
    else:
        config = tmp_path / "alice.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in
                                  _properties(cli_broker, PASSWORDS["alice"]).items()))
        args = ["-b", cli_broker.bootstrap("SASL_SSL"), "--command-config", str(config)]
    r = kafkactl([a.format(how=how) for a in case.ok] + args, case.stdin)
    assert r.returncode == 0, r.stderr
    assert case.shows in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.refused])
def test_refused_when_not_authorized(cli_broker: SecureBroker, name: str) -> None:
    case = CASES[name]
    assert case.refused is not None
    r = kafkactl([*case.refused, *_x(cli_broker)], case.stdin)
    _assert_clear_failure(r, case.error)


@pytest.mark.parametrize("name", list(CASES))
def test_refused_with_a_wrong_password(cli_broker: SecureBroker, name: str) -> None:
    case = CASES[name]
    ok = [a.format(how="wrong") for a in case.ok]
    r = kafkactl([*ok, *_x(cli_broker, "not-her-password")], case.stdin)
    _assert_clear_failure(r, "SASL_AUTHENTICATION_FAILED")


def test_x_overrides_the_command_config_and_typos_are_errors(cli_broker: SecureBroker,
                                                             tmp_path: Path) -> None:
    config = tmp_path / "wrong.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in
                              _properties(cli_broker, "wrong").items()) +
                      "request.timeout.ms=30000\n")  # a key Kafka's tools take: ignored
    base = ["topics", "list", "-b", cli_broker.bootstrap("SASL_SSL"),
            "--command-config", str(config)]
    r = kafkactl([*base, "-X", f"sasl.password={PASSWORDS['alice']}"])
    assert r.returncode == 0 and "orders" in r.stdout, r.stderr
    r = kafkactl([*base, "-X", "sasl.pasword=x"])
    assert r.returncode == 2 and "sasl.pasword" in r.stderr, r.stderr
    r = kafkactl(["topics", "list", "--command-config", str(tmp_path / "missing")])
    assert r.returncode == 2 and "missing" in r.stderr, r.stderr


def _mirror(args: list[str], status: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kafkactl", "mirror", "--json-status",
                             str(status), "--status-interval", "0.2", "--quiet", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_mirror_takes_security_from_its_config_files(cli_broker: SecureBroker,
                                                     tmp_path: Path) -> None:
    """MirrorMaker's --consumer.config / --producer.config files, with bootstrap.servers,
    group.id and the security properties, reach both clusters' clients."""
    import contextlib
    import json
    import signal
    import time

    lines = "".join(f"{k}={v}\n" for k, v in _properties(cli_broker, "x").items())
    consumer = tmp_path / "consumer.properties"
    consumer.write_text(f"bootstrap.servers={cli_broker.bootstrap('SASL_SSL')}\n"
                        "group.id=alice-mirror\nauto.offset.reset=earliest\n" + lines)
    producer = tmp_path / "producer.properties"
    producer.write_text(f"bootstrap.servers={cli_broker.bootstrap('SASL_SSL')}\n" + lines)
    status = tmp_path / "status.json"
    # the files' password is wrong: --consumer-property / --producer-property override it
    good = f"sasl.password={PASSWORDS['alice']}"
    proc = _mirror(["--consumer.config", str(consumer), "--producer.config", str(producer),
                    "--consumer-property", good, "--producer-property", good,
                    "--topic", "orders", "--rename", "orders:alice-copy"], status)
    try:
        deadline = time.monotonic() + 60
        mirrored = 0
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                mirrored = json.loads(status.read_text()).get("mirrored", 0)
            if mirrored >= 2:
                break
            time.sleep(0.2)
        assert mirrored >= 2, proc.stderr.read() if proc.poll() is not None else mirrored
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    r = kafkactl(["consume", "-t", "alice-copy", "--from-beginning", "-e", "-q",
                  *_x(cli_broker)])
    assert r.stdout.startswith("one\ntwo\n"), r.stdout + r.stderr
    # -X is for both clusters, and each side's file overrides it: the consumer file's
    # wrong password is used, and refused with one clear line, exit 1
    r = zygote.run(["mirror", "--quiet", "-X", good, "--consumer.config", str(consumer),
                    "--producer.config", str(producer), "--producer-property", good,
                    "--topic", "orders"], text=True, timeout=60)
    _assert_clear_failure(r, "SASL_AUTHENTICATION_FAILED")
    assert "source" in r.stderr or "SASL authentication" in r.stderr, r.stderr


def test_an_idempotent_producer_without_write_anywhere_fails_at_once(cli_broker: SecureBroker
                                                                     ) -> None:
    """carol may only read orders: InitProducerId is CLUSTER_AUTHORIZATION_FAILED (KIP-679),
    which is fatal for the idempotent producer, as in Kafka's. Before: `produce` retried it
    forever, printing a traceback per try, until it was killed."""
    add_scram_users(cli_broker.bootstrap("PLAINTEXT"), {"carol": PASSWORDS["carol"]})
    read = 3
    with Wire(cli_broker.bootstrap("PLAINTEXT")) as w:
        acl = {**_acl(TOPIC, "orders", LITERAL, read), "principal": "User:carol"}
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [acl]})
        assert r["results"][0]["error_code"] == 0, r
    args = ["-b", cli_broker.bootstrap("SASL_SSL")]
    for k, v in {**_properties(cli_broker, PASSWORDS["carol"]),
                 "sasl.username": "carol"}.items():
        args += ["-X", f"{k}={v}"]
    r = kafkactl(["produce", "-t", "orders", "-q", *args], "x\ny\n")
    _assert_clear_failure(r, "CLUSTER_AUTHORIZATION_FAILED")
    assert "IdempotentWrite" in r.stderr, r.stderr
    # not idempotent: the topic's own refusal
    r = kafkactl(["produce", "-t", "orders", "-q", "-X", "enable.idempotence=false", *args],
                 "x\n")
    _assert_clear_failure(r, "TOPIC_AUTHORIZATION_FAILED")
