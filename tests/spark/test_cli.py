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
