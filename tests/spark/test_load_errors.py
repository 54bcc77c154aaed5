"""The loader's refusals, found before Spark starts where they can be: a --topic the
credentials may not Describe is exit 3 (refused credentials), not "no such topic" (also
with --allow-empty); bad arguments are exit 2 with one line; and what only Spark finds
out ends in the innermost error a failed job's text relays (a Python data source's
traceback, a Java cause), not in "Traceback (most recent call last):". No Spark is
started here: the texts of failed jobs are as Spark 4 prints them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.spark import load
from tests import zygote
from tests.broker.security.certs import OPENSSL, make_certs
from tests.broker.security.conftest import (
    PASSWORDS,
    SecureBroker,
    add_scram_users,
    start_secure,
)
from tests.broker.wire import Wire

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:ANONYMOUS"}
REFUSED = ("kafkactl spark-load: error: --topic secret: TOPIC_AUTHORIZATION_FAILED (these "
           "credentials may not Describe it); nothing loaded")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """alice may Read (so Describe) topic orders, not secret; empty has no records."""
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    sb = start_secure(tmp_path_factory.mktemp("load-errors"),
                      make_certs(tmp_path_factory.mktemp("certs")), **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        for topic in ("orders", "secret", "empty"):
            assert w.create_topic(topic)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [{
            "resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})
        assert r["results"][0]["error_code"] == 0, r
    yield sb
    sb.broker.kill()


def _alice_config(path: Path) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=alice\nsasl.password={PASSWORDS['alice']}\n")
    return str(path)


def _no_spark_env(tmp_path: Path) -> dict[str, str]:
    """spark-submit would not run (there is none at this SPARK_HOME: exit 2, "cannot
    run"): what is refused must be refused before it."""
    return dict(os.environ, SPARK_HOME=str(tmp_path / "no-spark"),
                XDG_CACHE_HOME=str(tmp_path / "cache"))


def test_a_topic_not_authorized_is_refused_credentials(acl_broker: SecureBroker,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    config = _alice_config(tmp_path / "alice.properties")
    argv = ["--bootstrap", acl_broker.bootstrap("SASL_PLAINTEXT"), "--command-config",
            config, "--topic", "secret", "--output", str(tmp_path / "out")]
    for extra in ([], ["--allow-empty"]):
        assert load.main(argv + extra) == load.EXIT_BROKER == 3, extra
        assert capsys.readouterr().err.strip().splitlines()[-1] == REFUSED
    # the CLI, with a local master (the driver runs here): refused before spark-submit
    for extra in ([], ["--allow-empty"]):
        r = zygote.run(["spark-load", "-b", acl_broker.bootstrap("SASL_PLAINTEXT"),
                        "--command-config", config, "-t", "secret", "-o",
                        str(tmp_path / "out"), *extra],
                       env=_no_spark_env(tmp_path), text=True, timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.stderr.strip().splitlines()[-1] == REFUSED, r.stderr


def test_bad_arguments_are_exit_2_before_spark(acl_broker: SecureBroker, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    b, out = acl_broker.bootstrap("PLAINTEXT"), str(tmp_path / "out")
    cases = {
        ("-t", "empty", "--max-records-per-partition", "-5"):
            "--max-records-per-partition must be > 0 (got -5)",
        ("-p", "(["): "--pattern '([' is not a valid regex: ",
        ("-t", "empty", "-c", "notakeyvalue"): "--conf 'notakeyvalue': expected key=value",
        ("-t", "empty", "--master", "bogus://x"): "--master 'bogus://x' is not a Spark "
                                                  "master URL",
        ("-t", "empty", "--master", "local[x]"): "--master 'local[x]' is not a Spark "
                                                 "master URL",
    }
    for args, reason in cases.items():
        r = zygote.run(["spark-load", "-b", b, "-o", out, *args],
                       env=_no_spark_env(tmp_path), text=True, timeout=120)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and \
            lines[0].startswith(f"kafkactl spark-load: error: {reason}"), (args, lines)
    for r in ("local", "local[*]", "local[4]", "local[2, 3]", "local-cluster[2,1,1024]",
              "yarn", "spark://h:7077", "k8s://https://h:6443"):
        done = zygote.run(["spark-load", "-b", b, "-o", out, "-t", "empty", "--master", r,
                           "--print-command"], env=_no_spark_env(tmp_path), text=True,
                          timeout=120)
        assert done.returncode == 0, (r, done.stderr)
    # the loader itself (spark-submit by hand, a cluster's driver): the same refusals
    base = ["--bootstrap", b, "--output", out]
    assert load.main([*base, "-t", "empty", "--max-records-per-partition", "-5"]) == 2
    assert capsys.readouterr().err.strip().endswith("must be > 0 (got -5)")
    assert load.main([*base, "--pattern", "(["]) == 2
    assert "--pattern '([' is not a valid regex" in capsys.readouterr().err


# What Spark 4 relays when the data source's reader fails in its Python worker (an option
# refused; a broker gone between the driver's plan and the reader's), and when a task
# fails its retries: Python tracebacks inside Java's exception text.
READER_ERROR = """\
[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source reader: Traceback \
(most recent call last):
  File "/work/main/kafkactl/spark/source.py", line 84, in reader
    return KafkactlReader(dict(self.options))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/kafkactl/spark/options.py", line 148, in parse_positive_int
    raise OptionError(f"option {name} must be > 0 (got {n})")
kafkactl.spark.options.OptionError: option maxRecordsPerPartition must be > 0 (got -5)
 SQLSTATE: 38000"""
BROKER_GONE = READER_ERROR.replace(
    "kafkactl.spark.options.OptionError: option maxRecordsPerPartition must be > 0 (got -5)",
    "kafkactl.client.errors.NoBrokersAvailable: no broker answered at 127.0.0.1:9 (cannot "
    "connect to broker 127.0.0.1:9: Connection refused). Is `kafkactl serve` running "
    "there?")
TASK_FAILED = """\
An error occurred while calling o71.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 \
failed 1 times, most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (h executor \
driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/main/kafkactl/spark/partition_reader.py", line 213, in batches
    pf = self._receive(pos)
kafkactl.client.errors.KafkaConnectionError: broker 127.0.0.1:9 closed the connection

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/kafkactl/spark/partition_reader.py", line 221, in batches
    raise FetchError(f"reading {t}-{p} at offset {pos} (range "
kafkactl.spark.partition_reader.FetchError: reading t-0 at offset 5 (range 0..9): broker \
127.0.0.1:9 closed the connection

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException\
(PythonRunner.scala:612)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala)
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/main/kafkactl/spark/partition_reader.py", line 221, in batches
kafkactl.spark.partition_reader.FetchError: reading t-0 at offset 5 (range 0..9): broker \
127.0.0.1:9 closed the connection
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"""
JAVA_ONLY = """\
An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.
: org.apache.spark.SparkException: Could not parse Master URL: 'local[x]'
\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3200)"""


CASES = [
    (READER_ERROR, "option maxRecordsPerPartition must be > 0 (got -5)", 2),
    (BROKER_GONE, "broker unreachable: no broker answered at 127.0.0.1:9 (cannot connect", 3),
    (TASK_FAILED, "broker unreachable: reading t-0 at offset 5 (range 0..9): broker "
                  "127.0.0.1:9 closed the connection", 3),
    (JAVA_ONLY, "load failed: SparkException: Could not parse Master URL: 'local[x]'", 1),
]


def test_a_failed_jobs_reason_is_its_innermost_error() -> None:
    for text, reason, code in CASES:
        got, exit_code = load.task_failure(RuntimeError(text))
        assert got.startswith(reason) and exit_code == code, (got, exit_code)
        assert "Traceback" not in got
