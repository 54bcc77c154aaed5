"""`--command-config FILE` is read as Kafka's tools read --command-config, --producer.config
and --consumer.config: every key applies, checked as the same `-X` would be (a typo or a
bad value refused, exit 2, naming the file); -X overrides the file and the command's own
flags override both; the file's bootstrap.servers names the brokers when -b does not (and
before $KAFKACTL_BOOTSTRAP). The real CLI against a real broker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kafkactl.record.memory_records import iter_batches
from tests import zygote
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics and groups of their own: one broker for the module."""
    return module_broker


def kafkactl(*args: str, input: str = "", env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KAFKACTL_BOOTSTRAP"}
    return zygote.run(list(args), input=input, text=True, timeout=90,
                      env={**environ, **(env or {})})


def config(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def codecs_of(b: BrokerProcess, topic: str, batches: int) -> list[str]:
    seg = b.data_dir / f"{topic}-0" / "00000000000000000000.log"
    wait_until(lambda: seg.exists() and len(list(iter_batches(seg.read_bytes()))) >= batches,
               10, f"{batches} batches in {topic}")
    return [x.compression.name.lower() for x in iter_batches(seg.read_bytes())]


def test_produce_applies_the_files_compression_and_brokers(broker: BrokerProcess,
                                                           tmp_path: Path) -> None:
    gz = config(tmp_path, "gz.properties",
                f"bootstrap.servers={broker.bootstrap}\ncompression.type=gzip\n")
    r = kafkactl("produce", "-t", "cc-gzip", "--command-config", gz, "-q", input="a\nb\n")
    assert r.returncode == 0, r.stderr
    # -X overrides the file; a flag overrides both (and must agree with -X, as before)
    r = kafkactl("produce", "-t", "cc-gzip", "--command-config", gz, "-q",
                 "-X", "compression.codec=snappy", input="c\n")
    assert r.returncode == 0, r.stderr
    r = kafkactl("produce", "-t", "cc-gzip", "--command-config", gz, "-q", "-z", "lz4",
                 input="d\n")
    assert r.returncode == 0, r.stderr
    assert codecs_of(broker, "cc-gzip", 3) == ["gzip", "snappy", "lz4"]
    r = kafkactl("produce", "-t", "cc-gzip", "--command-config", gz, "-q", "-z", "lz4",
                 "-X", "compression.type=zstd", input="e\n")
    assert r.returncode == 2 and "disagree" in r.stderr, r.stderr


@pytest.mark.parametrize(("text", "command", "message"), [
    ("lingr.ms=5\n", "produce",
     "lingr.ms: not a producer property kafkactl knows; the closest is linger.ms"),
    ("acks=2\n", "produce", "acks=2: must be one of all, -1, 0, 1"),
    ("compression.type=brotli\n", "produce",
     "compression.type=brotli: must be one of none, gzip, snappy, lz4, zstd"),
    ("linger.ms=abc\n", "produce", "linger.ms=abc: needs a number of milliseconds"),
    ("group.id=g\n", "produce", "group.id: a consumer property; producer settings are e.g. "
     "client.id, request.timeout.ms, socket.timeout.ms, acks"),
    ("fetch.wait.max=5\n", "consume",
     "fetch.wait.max: not a consumer property kafkactl knows; the closest is "
     "fetch.wait.max.ms"),
    ("isolation.level=serializable\n", "consume",
     "isolation.level=serializable: must be one of read_uncommitted, read_committed"),
    ("foo.bar=1\n", "consume",
     "foo.bar: not a consumer property kafkactl knows (--help lists them)"),
    ("bootstrap.servers=24092\n", "consume",
     "bootstrap.servers=24092: '24092' has no host: expected host:port, e.g. "
     "127.0.0.1:24092"),
])
def test_the_files_keys_are_checked_as_x_would_be(tmp_path: Path, text: str, command: str,
                                                  message: str) -> None:
    bad = config(tmp_path, "bad.properties", text)
    r = kafkactl(command, "-t", "never", "--command-config", bad, input="x\n")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines() == [f"error: --command-config {bad}: {message}"]


def test_a_files_brokers_are_not_read_when_b_names_them(tmp_path: Path) -> None:
    bad = config(tmp_path, "bad.properties", "bootstrap.servers=24092\n")
    r = kafkactl("consume", "-t", "never", "--command-config", bad, "-b",
                 f"127.0.0.1:{free_port()}", "-e")
    assert r.returncode == 1 and "no broker answered" in r.stderr, r.stderr


def test_brokers_from_the_flag_then_the_file_then_the_environment(broker: BrokerProcess,
                                                                  tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    good = config(tmp_path, "good.properties", f"bootstrap.servers={broker.bootstrap}\n")
    dead = config(tmp_path, "dead.properties", f"bootstrap.servers={nobody}\n")
    env = {"KAFKACTL_BOOTSTRAP": nobody}
    # the file names the brokers without -b, before $KAFKACTL_BOOTSTRAP
    r = kafkactl("topics", "create", "-t", "cc-where", "--command-config", good, env=env)
    assert r.returncode == 0, r.stderr
    r = kafkactl("topics", "list", "--command-config", good, env=env)
    assert r.returncode == 0 and "cc-where" in r.stdout.split(), r.stderr
    # -b beats the file
    r = kafkactl("topics", "list", "--command-config", dead, "-b", broker.bootstrap)
    assert r.returncode == 0 and "cc-where" in r.stdout.split(), r.stderr
    r = kafkactl("topics", "list", "--command-config", dead,
                 env={"KAFKACTL_BOOTSTRAP": broker.bootstrap})
    assert r.returncode == 1 and nobody in r.stderr, r.stderr
    # a file without brokers: $KAFKACTL_BOOTSTRAP as before
    empty = config(tmp_path, "empty.properties", "client.id=x\n")
    r = kafkactl("topics", "list", "--command-config", empty,
                 env={"KAFKACTL_BOOTSTRAP": broker.bootstrap})
    assert r.returncode == 0 and "cc-where" in r.stdout.split(), r.stderr


def test_consume_takes_the_files_group_and_g_overrides_it(broker: BrokerProcess,
                                                          tmp_path: Path) -> None:
    r = kafkactl("produce", "-t", "cc-group", "-b", broker.bootstrap, "-q",
                 input="1\n2\n3\n")
    assert r.returncode == 0, r.stderr
    grp = config(tmp_path, "grp.properties",
                 f"bootstrap.servers={broker.bootstrap}\ngroup.id=cc-file-group\n"
                 "auto.offset.reset=earliest\n")
    r = kafkactl("consume", "-t", "cc-group", "--command-config", grp, "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["1", "2", "3"], r.stderr
    r = kafkactl("consume", "-t", "cc-group", "--command-config", grp, "-e", "-q",
                 "-G", "cc-flag-group")
    assert r.returncode == 0 and r.stdout.split() == ["1", "2", "3"], r.stderr
    r = kafkactl("offsets", "show", "-G", "cc-file-group", "-G", "cc-flag-group", "--json",
                 "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert [(g["group"], g["current_offset"]) for g in json.loads(r.stdout)] == [
        ("cc-file-group", 3), ("cc-flag-group", 3)], r.stdout
    r = kafkactl("consume", "-t", "cc-group", "--command-config", grp, "-e", "-q",
                 "-X", "group.id=other", "-G", "cc-flag-group")
    assert r.returncode == 2 and "name two groups" in r.stderr, r.stderr


def test_admin_commands_warn_about_settings_they_do_not_use(broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    used = config(tmp_path, "client.properties",
                  f"bootstrap.servers={broker.bootstrap}\nrequest.timeout.ms=30000\n"
                  "security.protocol=PLAINTEXT\n")
    r = kafkactl("topics", "list", "--command-config", used)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == (f"warning: --command-config {used}: request.timeout.ms: not "
                                "used by this command (it takes the security properties "
                                "and bootstrap.servers from the file)"), r.stderr
    typo = config(tmp_path, "typo.properties", "sasl.pasword=x\n")
    r = kafkactl("topics", "list", "--command-config", typo, "-b", broker.bootstrap)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"error: --command-config {typo}: sasl.pasword: not a client "
                                "property kafkactl knows; the closest is sasl.password")
