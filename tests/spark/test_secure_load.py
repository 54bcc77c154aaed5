"""The loader over SASL_SSL + SCRAM: `--command-config FILE` reaches the driver's clients
(planning, group offsets) and, as `kafka.`-prefixed data source options, the executors'; a
wrong password is one line and exit 3; Spark's `kafka.security.protocol` option names are
checked like the others."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.security.certs import OPENSSL, Certs, make_certs
from tests.broker.security.conftest import PASSWORDS, SecureBroker, add_scram_users, start_secure
from tests.spark.conftest import create_topic, produce


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    certs: Certs = make_certs(tmp_path_factory.mktemp("certs"))
    sb = start_secure(tmp_path_factory.mktemp("secure"), certs)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    create_topic(sb.bootstrap("PLAINTEXT"), "load.secure", 2)
    produce(sb.bootstrap("PLAINTEXT"), "load.secure",
            [(p, None, f"v{p}-{i}".encode(), None) for p in range(2) for i in range(5)])
    yield sb
    sb.broker.kill()


def _config(sb: SecureBroker, path: Path, password: str) -> Path:
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=alice\nsasl.password={password}\n"
                    f"ssl.ca.location={sb.certs.ca}\nrequest.timeout.ms=30000\n")
    return path


def test_load_over_sasl_ssl(spark: Any, secure: SecureBroker, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow.dataset as ds

    from kafkactl.spark import load

    out = tmp_path / "out"
    good = _config(secure, tmp_path / "alice.properties", PASSWORDS["alice"])
    argv = ["--bootstrap", secure.bootstrap("SASL_SSL"), "--topic", "load.secure",
            "--output", str(out), "--commit-group", "loader"]
    assert load.main([*argv, "--command-config", str(good)], spark) == load.EXIT_OK
    values = ds.dataset(str(out), format="parquet", partitioning="hive").to_table(
        columns=["value"]).column("value").to_pylist()
    assert sorted(values) == sorted(f"v{p}-{i}".encode() for p in range(2) for i in range(5))

    bad = _config(secure, tmp_path / "wrong.properties", "wrong")
    assert load.main([*argv, "--command-config", str(bad)], spark) == load.EXIT_BROKER
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("kafkactl spark-load: error: ") and \
        "SASL_AUTHENTICATION_FAILED" in line, line


def test_security_options_are_spark_kafka_options(secure: SecureBroker) -> None:
    from kafkactl.spark.options import OptionError, parse_read_options

    ro = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                             "kafka.security.protocol": "SASL_SSL",
                             "kafka.sasl.mechanism": "SCRAM-SHA-512",
                             "kafka.sasl.jaas.config": 'x required username="alice" '
                                                       'password="p";',
                             "kafka.ssl.ca.location": str(secure.certs.ca)})
    sec = ro.client_security()
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice", "p")
    with pytest.raises(OptionError, match="kafka.security.protocol=SASL_SLL"):
        parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                            "kafka.security.protocol": "SASL_SLL"})
