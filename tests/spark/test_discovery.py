"""`pip install kafkactl` is all a PySpark user does: Spark 4 discovers the `kafkactl` data
source (the `pyspark_kafkactl` package, SPARK-45917), and the README's example runs as
written. Each test runs a fresh Python (its own JVM) in a virtual environment holding this
distribution's packages as pip lays them out."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.jvm_archive import spark_jvm_options
from tests.spark.conftest import create_topic, produce, spark_missing

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing()))


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker


def distribution_packages() -> list[str]:
    """The top-level packages this distribution installs: pyproject.toml's
    [tool.setuptools.packages.find], as setuptools finds them."""
    from setuptools import find_namespace_packages

    with open(ROOT / "pyproject.toml", "rb") as f:
        find = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]
    found = find_namespace_packages(where=str(ROOT), include=find.get("include", ["*"]),
                                    exclude=find.get("exclude", ()))
    return sorted({name.split(".")[0] for name in found})


def installed_venv(tmp_path: Path) -> Path:
    """A virtual environment with this distribution installed as pip installs it (its
    packages copied into site-packages, bytecode not included); its dependencies (pyspark,
    pyarrow, ...) come from the test environment's site-packages, as pip would have
    installed them. Returns the environment's python."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True,
                               timeout=60).stdout.strip())
    deps = sysconfig.get_paths()["purelib"]
    (site / "zz_dependencies.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    for name in distribution_packages():
        shutil.copytree(ROOT / name, site / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return python


def readme_example() -> str:
    """The README's PySpark example (the first python block of the spark-load section)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### spark-load"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m is not None, "no python example in the README's spark-load section"
    return m.group(1)


def spark_script(body: str, bootstrap: str) -> str:
    """A script around a README-style body: the `spark` session a notebook or the pyspark
    shell provides before it, the rows it read printed as JSON after it."""
    options = " ".join(spark_jvm_options())
    return (
        "from pyspark.sql import SparkSession\n"
        "spark = (SparkSession.builder.master('local[2]').appName('readme')\n"
        "         .config('spark.ui.enabled', 'false')\n"
        "         .config('spark.ui.showConsoleProgress', 'false')\n"
        f"         .config('spark.driver.extraJavaOptions', {options!r}).getOrCreate())\n"
        "spark.sparkContext.setLogLevel('ERROR')\n"
        + body.replace("kafka1:9092", bootstrap)
        + "\nimport json\n"
        "print('ROWS', json.dumps(sorted([r.partition, r.offset, r.value.decode()]\n"
        "                                for r in df.collect())))\n"
        "print('COLUMNS', json.dumps(df.columns))\n")


def run_script(python: Path, script: str, tmp_path: Path, path_dirs: list[str]
               ) -> subprocess.CompletedProcess[str]:
    """Run it as a user would: a clean environment (no PYSPARK_PYTHON, no PYTHONPATH),
    PATH = path_dirs."""
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": os.pathsep.join(path_dirs),
           "SPARK_LOCAL_IP": "127.0.0.1", "LANG": "C.UTF-8"}
    for key in ("JAVA_HOME", "TMPDIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    java = shutil.which("java")
    if java and "JAVA_HOME" not in env:
        env["PATH"] += os.pathsep + str(Path(java).parent)
    path = tmp_path / "example.py"
    path.write_text(script)
    return subprocess.run([str(python), str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def rows_of(done: subprocess.CompletedProcess[str]) -> tuple[list[Any], list[str]]:
    out = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
           for line in done.stdout.splitlines() if line.startswith(("ROWS ", "COLUMNS "))}
    assert "ROWS" in out, (done.stdout + done.stderr)[-4000:]
    return out["ROWS"], out["COLUMNS"]


@pytest.mark.slow  # a Python and a Spark driver JVM of its own
def test_readme_example_runs_as_written(broker: Any, tmp_path: Path) -> None:
    """An activated virtual environment where kafkactl was installed: the README's example,
    as written (no register call), reads the topic."""
    assert "pyspark_kafkactl" in distribution_packages()
    example = readme_example()
    assert "register(" not in example, "the README's example should need no register call"
    b = broker.bootstrap
    create_topic(b, "events", 2)
    produce(b, "events", [(i % 2, None, f"v{i}".encode(), None) for i in range(6)])
    python = installed_venv(tmp_path)
    venv_bin = str(python.parent)
    done = run_script(python, spark_script(example, b), tmp_path,
                      [venv_bin, "/usr/local/bin", "/usr/bin", "/bin"])
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rows, columns = rows_of(done)
    assert rows == sorted([i % 2, i // 2, f"v{i}"] for i in range(6))
    # Spark's Kafka source schema: no headers column unless includeHeaders=true
    assert columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                       "timestampType"]


@pytest.mark.slow  # a Python and a Spark driver JVM of its own
def test_register_runs_workers_with_the_registering_python(broker: Any,
                                                             tmp_path: Path) -> None:
    """The environment not activated (its python run by path; the `python3` on PATH has no
    kafkactl): register(spark) makes the data source's workers run this python, as
    spark-load does, instead of failing with "No module named 'kafkactl'"."""
    b = broker.bootstrap
    create_topic(b, "registered", 1)
    produce(b, "registered", [(0, None, f"r{i}".encode(), None) for i in range(3)])
    python = installed_venv(tmp_path)
    body = ("from kafkactl.spark.source import register\n"
            "register(spark)\n"
            "df = (spark.read.format('kafkactl').option('kafka.bootstrap.servers', "
            "'kafka1:9092').option('subscribe', 'registered').load())\n")
    bare = tmp_path / "bare-bin"  # a python3 without kafkactl first on the PATH
    bare.mkdir()
    (bare / "python3").symlink_to(sys._base_executable)
    done = run_script(python, spark_script(body, b), tmp_path,
                      [str(bare), "/usr/local/bin", "/usr/bin", "/bin"])
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert rows_of(done)[0] == [[0, i, f"r{i}"] for i in range(3)]
