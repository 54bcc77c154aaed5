"""`kafkactl spark-load`'s argument errors say which command failed, as its other failures
do (`kafkactl spark-load: error: ...`, the driver's line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import zygote
from tests.spark.conftest import spark_missing


@pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing()))
def test_argument_errors_name_spark_load(tmp_path: Path) -> None:
    # no spark-submit at this SPARK_HOME: what is refused is refused before it would run
    env = dict(os.environ, SPARK_HOME=str(tmp_path / "no-spark"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    cases = {
        ("-p", "("): "--pattern '(' is not a valid regex: ",
        ("-t", "ev", "--max-records-per-partition", "0"):
            "--max-records-per-partition must be > 0 (got 0)",
        ("-t", "ev", "--master", "bogus"): "--master 'bogus' is not a Spark master URL",
        ("-t", "ev", "-c", "nokv"): "--conf 'nokv': expected key=value",
        ("-t", "ev", "-X", "nokv"): "property 'nokv' must look like key=value",
        ("-t", "ev", "-X", "linger.ms=5"): "-X linger.ms: not a client property",
        ("-t", "ev", "--partition-by", "hour"): "--partition-by takes partition or date",
        ("-t", "ev", "--isolation-level", "x"): "--isolation-level x: must be one of",
        (): "give either --topic (repeatable) or --pattern",
    }
    for args, reason in cases.items():
        r = zygote.run(["spark-load", "-b", "127.0.0.1:1", "-o", str(tmp_path / "out"),
                        *args], env=env, text=True, timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.splitlines() == [r.stderr.strip()], (args, r.stderr)
        assert r.stderr.startswith(f"kafkactl spark-load: error: {reason}"), (args, r.stderr)
