"""`kafkactl spark-load` without running Spark: the command line it builds, and a --help
that does not import pyspark."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import zygote
from tests.spark.conftest import spark_missing


@pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing()))
def test_print_command_and_fast_help(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    out = zygote.run(["spark-load", "-b", "h:1", "-p", r"ev\..*", "-o", "rel/out",
                      "--commit-group", "g", "--print-command"], env=env, text=True,
                     timeout=60, check=True).stdout.strip()
    words = shlex.split(out)
    assert words[0] == f"PYSPARK_PYTHON={sys.executable}"
    assert words[1].endswith("/bin/spark-submit")
    assert words[words.index("--master") + 1] == "local[*]"
    assert f"spark.pyspark.python={sys.executable}" in words
    zip_path = Path(words[words.index("--py-files") + 1])
    assert zip_path.parent == tmp_path / "cache" / "kafkactl"
    names = zipfile.ZipFile(zip_path).namelist()
    assert "kafkactl/spark/partition_reader.py" in names and "kafkactl/client/consumer.py" \
        in names
    load_py = words[words.index("--py-files") + 2]
    assert load_py.endswith("kafkactl/spark/load.py")
    assert words[words.index(load_py) + 1:] == [
        "--bootstrap", "h:1", "--output", str(Path("rel/out").absolute()),
        "--fail-on-data-loss", "true", "--pattern", r"ev\..*", "--commit-group", "g"]

    probe = ("import sys, kafkactl.cli.app as a; "
             "print(any(m.split('.')[0] in ('pyspark', 'pyarrow', 'py4j') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip() == "False"


@pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing()))
def test_isolation_level_read_committed_unless_asked(tmp_path: Path) -> None:
    """The loader reads read_committed by default (no aborted transaction's records in the
    warehouse); --isolation-level and -X isolation.level (Kafka's consumer property) pick
    read_uncommitted, which the loader is then passed; a bad value, or the two disagreeing,
    is refused (exit 2); --help says what is read."""
    from kafkactl.spark import load

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))

    def loader_words(*extra: str) -> list[str]:
        out = zygote.run(["spark-load", "-b", "h:1", "-t", "ev", "-o", "out", *extra,
                          "--print-command"], env=env, text=True, timeout=60, check=True)
        words = shlex.split(out.stdout.strip())
        return words[next(i for i, w in enumerate(words) if w.endswith("load.py")) + 1:]

    assert "--isolation-level" not in loader_words()
    assert load.parser().parse_args(["-o", "x"]).isolation_level == "read_committed"
    assert "--isolation-level" not in loader_words("--isolation-level", "read_committed")
    for extra in (["--isolation-level", "read_uncommitted"],
                  ["-X", "isolation.level=read_uncommitted"],
                  ["-X", "isolation.level=READ_UNCOMMITTED", "--isolation-level",
                   "read_uncommitted"]):
        words = loader_words(*extra)
        assert words[words.index("--isolation-level") + 1] == "read_uncommitted", extra
    assert load.parser().parse_args(["-o", "x", "--isolation-level", "read_uncommitted"]
                                    ).isolation_level == "read_uncommitted"
    for extra, reason in (
            (["--isolation-level", "committed"], "--isolation-level committed: must be one of"),
            (["-X", "isolation.level=x"], "-X isolation.level=x: must be one of"),
            (["-X", "isolation.level=read_uncommitted", "--isolation-level",
              "read_committed"], "--isolation-level read_committed and -X "
                                 "isolation.level=read_uncommitted disagree")):
        r = zygote.run(["spark-load", "-b", "h:1", "-t", "ev", "-o", "out", *extra,
                        "--print-command"], env=env, text=True, timeout=60)
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert r.stderr.strip().startswith(f"kafkactl spark-load: error: {reason}"), \
            (extra, r.stderr)
    help_text = " ".join(zygote.run(["spark-load", "--help"], env=dict(env, COLUMNS="200"),
                                    text=True, timeout=60, check=True).stdout.split())
    assert "Reads read_committed by default" in help_text
    assert "--isolation-level" in help_text and "read_uncommitted" in help_text
