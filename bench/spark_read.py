"""Spark batch read of a topic vs `kafkactl consume`, and the loader into Parquet, one run.

    python bench/spark_read.py [N] [PARTITIONS]     (default 1,000,000 records of 100 B, 2)

Starts `kafkactl serve` on a free port with a temp data dir and produces two topics of N
records of 100 bytes over PARTITIONS partitions: keyed records (the reader decodes them
record by record) and null-key lines as `kafkactl produce` writes them (sliced out per
batch). For each, reading the same page-cached topic:
  consume: `kafkactl consume --from-beginning -e > /dev/null` (whole process, start-up in)
  spark:   spark.read.format("kafkactl") ... .write.format("noop") in local[2] (every
           column materialised in Spark; session start-up not counted, planning counted)
then the loader, kafkactl.spark.load.run(), of both topics into Parquet (plan, Spark job,
commit, publish). Prints records/s and the ratios spark/consume (issue 18's goal: >= 0.5).
Never gates anything: the machine is shared and noisy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_common import start_broker  # noqa: E402

from kafkactl.client.admin import AdminClient  # noqa: E402
from kafkactl.client.producer import Producer  # noqa: E402


def fill(bootstrap: str, topic: str, n: int, partitions: int, keyed: bool = True) -> None:
    """n records of 100 B: keyed (the general per-record decoder), or null-key lines as
    `kafkactl produce` writes them (the reader's columnar path), round robin."""
    with AdminClient(bootstrap) as admin:
        assert admin.create_topics({topic: (partitions, 1, {})})[topic] is None
    p = Producer(bootstrap, linger_ms=20, batch_size=1_000_000, max_request_size=4_000_000)
    chunk = 10_000
    for start in range(0, n, chunk):
        values = [b"%-100d" % i for i in range(start, min(n, start + chunk))]
        if keyed:
            p.send_key_values(topic, [b"key-%09d" % i for i in range(start, start + chunk)
                                      ][:len(values)], values)
        else:
            p.send_values(topic, values, partition=(start // chunk) % partitions)
    assert p.flush(300)
    p.close()


def timed_consume(bootstrap: str, topic: str) -> float:
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-b", bootstrap, "-t",
                        topic, "--from-beginning", "-e", "-q"], stdout=null, check=True)
    return time.perf_counter() - t


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    parts = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    broker = start_broker("log.segment.bytes=1073741824")
    try:
        b = broker.bootstrap
        shapes = (("keyed", True), ("lines", False))
        for topic, keyed in shapes:
            t = time.perf_counter()
            fill(b, topic, n, parts, keyed)
            print(f"produced {n:,} {topic} records of 100 B into {parts} partitions in "
                  f"{time.perf_counter() - t:.1f} s")
        consume_s = {}
        for topic, _ in shapes:
            timed_consume(b, topic)  # warm the page cache and the interpreter's files
            consume_s[topic] = min(timed_consume(b, topic) for _ in range(2))

        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        from kafkactl.spark import load
        from kafkactl.spark.source import register

        t = time.perf_counter()
        spark = (SparkSession.builder.master("local[2]").appName("kafkactl-bench")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        print(f"spark session started in {time.perf_counter() - t:.1f} s (not counted)")

        def spark_read(topic: str) -> float:
            t0 = time.perf_counter()
            (spark.read.format("kafkactl").option("kafka.bootstrap.servers", b)
             .option("subscribe", topic).load()
             .write.format("noop").mode("overwrite").save())
            return time.perf_counter() - t0

        spark_s = {}
        for topic, _ in shapes:
            spark_read(topic)  # warm the Python workers
            spark_s[topic] = min(spark_read(topic) for _ in range(2))
            rows = spark.read.format("kafkactl").option("bootstrap", b).option(
                "subscribe", topic).load().count()
            assert rows == n, rows

        out = Path(tempfile.mkdtemp(prefix="kafkactl-bench-load-"))
        t = time.perf_counter()
        summary = load.run(load.parser().parse_args(
            ["--bootstrap", b, "--topic", "keyed", "--topic", "lines",
             "--output", str(out / "o")]), spark)
        load_s = time.perf_counter() - t
        print(summary)
        spark.stop()

        for topic, _ in shapes:
            c, s_ = consume_s[topic], spark_s[topic]
            print(f"{topic:5}: kafkactl consume > /dev/null {n / c:11,.0f} rec/s ({c:.2f} s)"
                  f" | spark read local[2] {n / s_:11,.0f} rec/s ({s_:.2f} s)"
                  f" | spark/consume {c / s_:.2f}x (goal >= 0.5)")
        print(f"loader -> Parquet, both topics: {2 * n / load_s:,.0f} rec/s ({load_s:.2f} s)")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
