"""The loader on a real Spark standalone cluster: a master and one worker started from
pyspark's own launch scripts on 127.0.0.1, `kafkactl spark-load --master spark://...`,
executors that can import kafkactl only from the zip spark-load ships (--py-files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.jvm_archive import spark_jvm_options
from tests.spark.conftest import create_topic, jvm_confs, produce, spark_missing
from tests.spark.test_load import every, loaded

# On the worker's PYTHONPATH: hides every kafkactl but the shipped zip from the executors'
# Python (the venv's editable install points at another checkout).
HIDE_KAFKACTL = """\
import sys
sys.meta_path[:] = [f for f in sys.meta_path
                    if "editable" not in getattr(f, "__module__", "").lower()
                    and "editable" not in type(f).__name__.lower()]
sys.path[:] = [p for p in sys.path if not (p and __import__("os").path.isdir(
    __import__("os").path.join(p, "kafkactl")))]
"""


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_for(check: Any, what: str, procs: list[subprocess.Popen[bytes]],
             timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"{what}: a Spark daemon exited with {p.returncode}"
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_KAFKACTL)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(hide),
               SPARK_DAEMON_JAVA_OPTS=" ".join(spark_jvm_options()),
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_NO_DAEMONIZE="1")
    port, ui = free_port(), free_port()
    work = tmp_path / "work"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for name, args in (
                ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                            "--port", str(port), "--webui-port", str(ui)]),
                ("worker", ["org.apache.spark.deploy.worker.Worker",
                            f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores",
                            "2", "--memory", "1g", "--webui-port", str(free_port()),
                            "--work-dir", str(work)])):
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen([spark_class(), *args], env=env, cwd=tmp_path,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))

        def alive_workers() -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    return int(json.load(r).get("aliveworkers", 0))
            except OSError:
                return 0
            except ValueError:  # for a moment at start the UI answers /json/ with its HTML
                # page (Spark attaches a page's handler before its JSON one): not up yet
                return 0

        wait_for(alive_workers, "the worker to register with the master", procs)
        yield f"spark://127.0.0.1:{port}", work, env
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        for log in logs:
            log.close()


@pytest.mark.slow  # spark-submit runs: tens of seconds
def test_loader_on_a_standalone_cluster(standalone: Any, broker: Any, tmp_path: Path) -> None:
    master, work, cluster_env = standalone
    # the executors' Python, with the worker's environment, cannot import kafkactl itself
    hidden = subprocess.run([sys.executable, "-c", "import kafkactl"], env=cluster_env,
                            cwd=tmp_path, capture_output=True, text=True)
    assert hidden.returncode != 0 and "No module named 'kafkactl'" in hidden.stderr

    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "cluster.a", 3)
    produce(b, "cluster.a", [(p, None, f"v{p}-{i}".encode(), None)
                             for p in range(3) for i in range(50)])
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [sys.executable, "-m", "kafkactl", "spark-load", "-b", b, "-p", r"cluster\..*",
           "-o", str(out), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", *jvm_confs()]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "loaded 150 records from 3 partitions" in done.stdout
    assert loaded(out) == every({("cluster.a", p): 50 for p in range(3)})
    # the executor fetched the shipped zip into its work directory
    shipped = list(work.glob("app-*/*/kafkactl-*.zip"))
    assert shipped, sorted(str(p) for p in work.rglob("*"))[:50]


DRIVER = """\
import json, sys
from pyspark.sql import SparkSession
master, bootstrap, options = sys.argv[1:4]
spark = (SparkSession.builder.master(master).appName("kafkactl-register")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.extraJavaOptions", options)
         .config("spark.executor.extraJavaOptions", options).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
from kafkactl.spark.source import register
register(spark)
df = (spark.read.format("kafkactl").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", "cluster.r").load())
print("ROWS", json.dumps(sorted([r.partition, r.offset, r.value.decode()]
                                for r in df.collect())))
spark.stop()
"""


@pytest.mark.slow  # a standalone cluster and a driver: tens of seconds
def test_register_ships_kafkactl_to_executors_that_lack_it(standalone: Any, broker: Any,
                                                           tmp_path: Path) -> None:
    """PySpark against a cluster whose executors' Python cannot import kafkactl:
    register(spark) ships kafkactl's sources as the zip spark-load ships (--py-files), and
    the read runs there."""
    master, work, _ = standalone
    b = broker.bootstrap
    create_topic(b, "cluster.r", 2)
    produce(b, "cluster.r", [(p, None, f"r{p}-{i}".encode(), None)
                             for p in range(2) for i in range(4)])
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_PYTHON", None)
    done = subprocess.run([sys.executable, str(script), master, b,
                           " ".join(spark_jvm_options())], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rows = next(json.loads(line[5:]) for line in done.stdout.splitlines()
                if line.startswith("ROWS "))
    assert rows == sorted([p, i, f"r{p}-{i}"] for p in range(2) for i in range(4))
    assert list(work.glob("app-*/*/kafkactl-*.zip")), "the executor got no kafkactl zip"
