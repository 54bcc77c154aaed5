"""A class-data-sharing (CDS) archive for the Spark JVMs the tests start.

A Spark driver JVM spends about half of its CPU loading and linking the ~12,000 classes a
small job touches (a local SparkSession with one job: ~10 CPU-s, ~5 with the archive). The
JVM can map those classes from an archive made by an earlier run instead
(`-XX:ArchiveClassesAtExit`, JDK 13+); making one costs ~20 CPU-s more than the run that
makes it, so it is kept between test runs, like pip's cache:
`${XDG_CACHE_HOME:-~/.cache}/kafkactl-tests/spark-<key>.jsa` (~180 MB), the key a hash of
the Java runtime, Spark's jars (their paths, modification times and sizes: the JVM refuses
an archive made with other copies, another checkout's or a re-made virtual environment's)
and the JVM options. The three archives used last are kept; making a fourth removes the
oldest.

`python -m tests.jvm_archive` makes it when it is missing (scripts/test.sh does, before
pytest; a no-op when cached, skipped when Spark or Java is not installed);
`spark_jvm_options()` is what the tests give every JVM that runs Spark's jars (drivers,
executors, a standalone master and worker: they all start from the classpath the archive
was made with, and all map it): TEST_JVM_OPTIONS, plus the archive when there is one.
Without an archive every test still runs, only slower. KAFKACTL_TEST_JVM_ARCHIVE=0 turns
it off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.jvm_options import TEST_JVM_OPTIONS

_JOB = """\
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("kafkactl-tests-cds")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
df = spark.range(1000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS v")
out = {out!r}
df.groupBy("k").count().collect()
df.write.mode("overwrite").partitionBy("k").parquet(out + "/p")
df.write.mode("overwrite").json(out + "/j")
spark.read.parquet(out + "/p").where("id > 5").count()
spark.stop()
"""


def _spark_home() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent


@functools.lru_cache(maxsize=1)
def archive_path() -> Path | None:
    """Where this machine's archive for this Spark, JDK and options is (made or not); None
    when archives are off or Spark or Java is missing."""
    if os.environ.get("KAFKACTL_TEST_JVM_ARCHIVE", "1") == "0":
        return None
    home, java = _spark_home(), shutil.which("java")
    if home is None or java is None:
        return None
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True,
                                 timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    # the JVM checks each jar's modification time and size against the archive's, and
    # silently runs without an archive made with other copies (a re-made environment)
    jars = sorted(f"{p.name} {st.st_mtime_ns} {st.st_size}"
                  for p in (home / "jars").glob("*.jar") for st in [p.stat()])
    key = hashlib.sha256("\n".join([os.path.realpath(java), version, str(home), *jars,
                                    *TEST_JVM_OPTIONS]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kafkactl-tests" / f"spark-{key}.jsa"


KEEP = 3  # archives kept (one per checkout or Spark installation used lately)


def spark_jvm_options() -> tuple[str, ...]:
    """JVM options for a Spark JVM in a test: the archive's when it is made."""
    path = archive_path()
    if path is None or not path.is_file():
        return TEST_JVM_OPTIONS
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: the last to be removed
    return (*TEST_JVM_OPTIONS, f"-XX:SharedArchiveFile={path}")


def make() -> str:
    """Make the archive when it is missing; a line saying what happened."""
    path = archive_path()
    if path is None:
        return "no Spark archive: Spark or Java is not installed (or it is turned off)"
    if path.is_file():
        return f"Spark class archive: {path} (cached)"
    home = _spark_home()
    assert home is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = sorted(path.parent.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime)
    for old in kept[:max(len(kept) - (KEEP - 1), 0)]:  # the least recently used
        old.unlink(missing_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafkactl-cds-") as tmp:
        job = Path(tmp) / "job.py"
        job.write_text(_JOB.format(out=str(Path(tmp) / "out")))
        partial = Path(tmp) / "spark.jsa"
        options = " ".join([*TEST_JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={partial}"])
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        done = subprocess.run([str(home / "bin" / "spark-submit"), "--conf",
                               f"spark.driver.extraJavaOptions={options}", str(job)],
                              env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not partial.is_file():
            return (f"no Spark archive: the job that makes it failed ({done.returncode}):\n"
                    + done.stderr[-2000:])
        shutil.move(str(partial), str(path.with_suffix(".tmp")))
        os.replace(path.with_suffix(".tmp"), path)
    return f"Spark class archive: {path} (made in {time.monotonic() - started:.0f} s)"


if __name__ == "__main__":
    print(make())
