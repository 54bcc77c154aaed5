"""Replication on three brokers of this machine (they share its cores), in one run:

1. ingest with `kcat -P` of 100-byte records: replication factor 3 with acks=all versus
   replication factor 1 with acks=1 (the ratio; Kafka's 2014 figure kept ~51%);
2. replication lag under that load: the followers' distance behind the leader's log end,
   sampled every 50 ms (from each broker's ListOffsets as a replica would see it);
3. end-to-end latency at a steady 10,000 records/s, RF=3 acks=all (confluent-kafka producer
   -> confluent-kafka consumer): p50 / p99;
4. fail-over: time from SIGKILL of a partition's leader to the first acks=all write
   acknowledged by its successor.

Usage: python bench/replication.py [--records N]   (needs ZooKeeper, java, kcat,
confluent-kafka); `--failover-only ROUNDS` times only the fail-over, phase by phase
(bench/replication_failover.py), alternating a victim that is the controller and one that
is not.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replication_failover import (  # noqa: E402
    SESSION_TIMEOUT_MS,
    BenchCluster,
    create,
    failover_only,
    failover_round,
    isr_full,
    wait,
)
from kafkactl.protocol.api_keys import ApiKey  # noqa: E402
from tests.cluster.cluster_helpers import leaders, request  # noqa: E402
from tests.cluster.zk import ZooKeeperServer, available  # noqa: E402

WARMUP_S = 1.0  # end-to-end latency: records sent in the first second are not counted


def kcat(bootstrap: str, topic: str, payload: bytes, acks: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", f"acks={acks}",
                        "-X", "linger.ms=5"], input=payload, capture_output=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(r.stderr.decode())
    return time.perf_counter() - t0


def log_end(port: int, topic: str, p: int) -> int:
    resp = request(port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": 1000, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return int(resp["topics"][0]["partitions"][0]["offset"])


# C901: a benchmark's main: options, the cluster, the measured runs and the report in order
def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--failover-only", type=int, metavar="ROUNDS", default=0,
                    help="only the fail-over, ROUNDS times (victim: the controller, then "
                         "not, in turn), phase by phase")
    ap.add_argument("--load-partitions", type=int, default=50,
                    help="with --failover-only: partitions of a second RF=3 topic, state "
                         "the controller loads (the full run has ~56 partitions)")
    ap.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE",
                    help="with --failover-only: a broker setting (repeatable), e.g. "
                         "replica.fetch.wait.max.ms=50")
    args = ap.parse_args()
    if available() is not None or shutil.which("kcat") is None:
        raise SystemExit(f"needs ZooKeeper, java and kcat: {available()}")
    import confluent_kafka

    base = Path(tempfile.mkdtemp(prefix="kafkactl-repl-bench-"))
    zk = ZooKeeperServer(base / "zk", jvm_options=())  # the JVM's defaults, not the tests'
    zk.start()
    if args.failover_only:
        try:
            failover_only(zk, base, args.failover_only, args.load_partitions,
                          args.broker_override)
        finally:
            zk.stop()
            shutil.rmtree(base, ignore_errors=True)
        return
    cluster = BenchCluster(zk, base, "replica.fetch.backoff.ms=100",
                           "replica.lag.time.max.ms=10000")
    brokers = cluster.brokers
    try:
        cluster.start_all()
        ctl = brokers[cluster.controller()]
        boot = ",".join(b.bootstrap for b in brokers.values())
        create(ctl.port, "rf1", 3, 1)
        create(ctl.port, "rf3", 3, 3)
        wait(lambda: isr_full(ctl.port, "rf3", 3) and isr_full(ctl.port, "rf1", 1), 60,
             "topics")

        # -- 1 + 2: ingest, and the followers' lag meanwhile -----------------------------------
        payload = b"".join(b"%099d\n" % i for i in range(args.records))
        s1 = kcat(boot, "rf1", payload, "1")
        lags: list[int] = []
        stop = threading.Event()
        lead = leaders(ctl.port, "rf3")

        def sample() -> None:
            while not stop.is_set():
                for p, leader in lead.items():
                    try:
                        top = log_end(brokers[leader].port, "rf3", p)
                        for bid, b in brokers.items():
                            if bid != leader:
                                lags.append(max(0, top - log_end(b.port, "rf3", p)))
                    except Exception:
                        pass
                time.sleep(0.05)

        t = threading.Thread(target=sample)
        t.start()
        s3 = kcat(boot, "rf3", payload, "all")
        stop.set()
        t.join()
        print(f"kcat -P {args.records} x 100 B, 3 partitions: RF=1 acks=1 "
              f"{args.records / s1:,.0f} rec/s; RF=3 acks=all {args.records / s3:,.0f} rec/s "
              f"(ratio {s1 / s3:.2f})")
        if lags:
            print(f"  follower lag during the RF=3 ingest: median {statistics.median(lags):,.0f}"
                  f" records, max {max(lags):,} ({len(lags)} samples)")

        # -- 3: end-to-end latency at 10k rec/s, RF=3 acks=all ---------------------------------
        consumer = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": "lat",
                                            "auto.offset.reset": "latest",
                                            "fetch.wait.max.ms": 10})
        consumer.subscribe(["rf3"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        producer = confluent_kafka.Producer({"bootstrap.servers": boot, "acks": "all",
                                            "linger.ms": 0, "enable.idempotence": True})
        latencies: list[float] = []
        measured: list[bool] = []  # sent after the warm-up (the consumer's start-up aside)
        n, rate, seconds = 0, 10_000, 5
        start = time.perf_counter()
        while n < rate * seconds:
            due = start + n / rate
            now = time.perf_counter()
            if now < due:
                msg = consumer.poll(max(0.0, due - now))
            else:
                producer.produce("rf3", b"%.9f" % time.perf_counter())
                producer.poll(0)
                n += 1
                msg = consumer.poll(0)
            while msg is not None:
                if msg.error() is None:
                    sent = float(msg.value())
                    latencies.append((time.perf_counter() - sent) * 1000)
                    measured.append(sent >= start + WARMUP_S)
                msg = consumer.poll(0)
        producer.flush(30)
        end = time.monotonic() + 5
        while len(latencies) < n and time.monotonic() < end:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                sent = float(msg.value())
                latencies.append((time.perf_counter() - sent) * 1000)
                measured.append(sent >= start + WARMUP_S)
        consumer.close()
        first = statistics.quantiles(latencies, n=100)
        latencies = [lat for lat, m in zip(latencies, measured, strict=True) if m]
        q = statistics.quantiles(latencies, n=100)
        print(f"  (all records, the first {WARMUP_S:g} s included: p50 {first[49]:.2f} ms, "
              f"p99 {first[98]:.2f} ms)")
        print(f"end-to-end at {rate:,} rec/s, RF=3 acks=all: p50 {q[49]:.2f} ms, p99 "
              f"{q[98]:.2f} ms ({len(measured):,} of {n:,} records seen, {len(latencies):,} "
              f"sent after the warm-up)")

        # -- 4: fail-over ------------------------------------------------------------------------
        victim = leaders(ctl.port, "rf3")[0]
        run = failover_round(cluster, None, victim, 0)
        print(f"leader SIGKILLed{' (it was the controller too)' if run.was_controller else ''}: "
              f"first acks=all write on its successor after {run.acked:.2f} s (session "
              f"timeout {SESSION_TIMEOUT_MS / 1000:.0f} s)")
    finally:
        cluster.stop()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
